/**
 * A schedule's definition (`ScheduledTurnInput`): its checks, its signature, the ids a firing
 * derives, and the limits a firing's turn runs under. Node only (never workflow code).
 */
import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import type { BudgetLimits } from '../../agents/agent.js';
import type { ScheduleBudget, ScheduledTurnInput } from '../../contract/schedule.js';
import { SCHEDULE_OVERLAPS } from '../../contract/schedule.js';
import type { ScheduleOverlap } from '../../contract/schedule.js';
import { ArgumentError } from '../../errors.js';
import { canonicalJson } from '../../store/records.js';

/** A TurnKit schedule id: Temporal's schedule is `turnkit-schedule-<id>`. */
const SCHEDULE_ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$/;

export function checkScheduleId(id: unknown): string {
  if (typeof id !== 'string' || !SCHEDULE_ID.test(id))
    throw new ArgumentError(
      `a schedule id must be 1-200 letters, digits, '.', '_' or '-', starting with a letter or digit; got ${JSON.stringify(id)}`,
    );
  return id;
}

export function checkOverlap(overlap: unknown): ScheduleOverlap {
  if (overlap === undefined) return 'skip';
  if (typeof overlap === 'string' && (SCHEDULE_OVERLAPS as readonly string[]).includes(overlap))
    return overlap as ScheduleOverlap;
  throw new ArgumentError(
    `overlap must be one of ${SCHEDULE_OVERLAPS.join(', ')}; got ${JSON.stringify(overlap)}`,
  );
}

const BUDGET_KEYS = ['maxSpend', 'maxIterations', 'maxToolExecutions', 'timeout', 'maxSpendPerDay'] as const;
const INTEGER_KEYS = new Set<string>(['maxIterations', 'maxToolExecutions']);

/** A schedule's budget, checked: known keys, spend ≥ 0, counts positive integers, timeout > 0. */
export function checkBudget(budget: unknown): ScheduleBudget | undefined {
  if (budget === undefined) return undefined;
  if (budget === null || typeof budget !== 'object' || Array.isArray(budget))
    throw new ArgumentError('a schedule budget must be an object');
  const checked: ScheduleBudget = {};
  for (const [key, value] of Object.entries(budget)) {
    if (!(BUDGET_KEYS as readonly string[]).includes(key))
      throw new ArgumentError(`unknown schedule budget key ${key} (known: ${BUDGET_KEYS.join(', ')})`);
    if (value === undefined) continue;
    const integer = INTEGER_KEYS.has(key);
    const ok =
      typeof value === 'number' &&
      Number.isFinite(value) &&
      (integer ? Number.isInteger(value) && value > 0 : key === 'timeout' ? value > 0 : value >= 0);
    if (!ok)
      throw new ArgumentError(
        `schedule budget ${key} must be ${integer ? 'a positive integer' : key === 'timeout' ? 'a positive number of seconds' : 'a non-negative number (USD)'}`,
      );
    checked[key as (typeof BUDGET_KEYS)[number]] = value;
  }
  return checked;
}

/** The tighter of the agent's limits and the schedule's caps (spend: `remaining` too, if given). */
export function cappedLimits(
  agent: BudgetLimits,
  budget: ScheduleBudget | undefined,
  remaining?: number,
): BudgetLimits {
  const min = (a: number | null, b: number | undefined) =>
    b === undefined ? a : a === null ? b : Math.min(a, b);
  const spend = min(min(agent.maxSpend, budget?.maxSpend), remaining);
  return {
    ...agent,
    maxToolExecutionsByName: { ...agent.maxToolExecutionsByName },
    maxIterations: min(agent.maxIterations, budget?.maxIterations)!,
    maxToolExecutions: min(agent.maxToolExecutions, budget?.maxToolExecutions)!,
    timeout: min(agent.timeout, budget?.timeout),
    maxSpend: spend,
  };
}

/** What the signature covers: everything a firing acts on (the activity settings aside). */
function signedBytes(definition: Omit<ScheduledTurnInput, 'mac'>): string {
  return canonicalJson({
    v: 'turnkit-schedule-1',
    schedule: definition.scheduleId,
    agent: definition.agent,
    task: definition.task,
    conversation: definition.conversationId,
    principal: definition.principal ?? null,
    budget: definition.budget ?? null,
  });
}

function macOf(key: string | Buffer, definition: Omit<ScheduledTurnInput, 'mac'>): Buffer {
  return createHmac('sha256', key).update(signedBytes(definition)).digest();
}

/** The definition with its MAC (null without a key). */
export function signDefinition(
  key: string | Buffer | undefined,
  definition: Omit<ScheduledTurnInput, 'mac'>,
): ScheduledTurnInput {
  return { ...definition, mac: key === undefined ? null : macOf(key, definition).toString('base64url') };
}

/** Whether the definition is as a client holding `key` wrote it. */
export function definitionSigned(key: string | Buffer, definition: ScheduledTurnInput): boolean {
  if (typeof definition.mac !== 'string') return false;
  const given = Buffer.from(definition.mac, 'base64url');
  const expected = macOf(key, definition);
  return given.length === expected.length && timingSafeEqual(given, expected);
}

/**
 * A firing's ids, derived from the firing workflow's id and its first run (stable across
 * activity retries, replays and resets of that firing; new for every firing, even two
 * triggers in the same second): a retried activity finds the rows it wrote.
 */
export function firingIds(firingId: string, firstRunId: string): { turnId: string; conversationId: string } {
  const hash = (kind: string) =>
    createHash('sha256').update(`${kind}:${firingId}:${firstRunId}`).digest('hex').slice(0, 24);
  return { turnId: `turn_${hash('turn')}`, conversationId: `conv_${hash('conv')}` };
}
