/**
 * An erasure as a sequence of bounded steps (decision 78), each reading where the erasure
 * stands from its ledger row (`turnkit_erasures`), doing one piece of work and saving the new
 * state. The subject's schedules go first (so no firing starts a new conversation), then each
 * of its conversations' groups: counted, stopped (open workflows terminated), their workflow
 * executions deleted, then their rows a batch per transaction. What a group holds is counted
 * once, before anything of it is deleted, in the same save that moves the erasure on: a step
 * that fails after deleting redoes nothing twice and the report does not change.
 */
import type { Client } from '@temporalio/client';
import { ArgumentError, ConfigError, RecordNotFound } from '../errors.js';
import { canonicalJson } from '../store/records.js';
import type { SqlStatements } from '../store/sql/sql-store.js';
import { laneWorkflowId, turnWorkflowId } from '../workflows/contract.js';
import {
  countGroup,
  deleteConversationRows,
  findPrincipalConversation,
  groupOf,
  turnIdsPage,
} from './erasure-rows.js';
import {
  conversationRunsQuery,
  conversationWorkflowIds,
  firingRunsQuery,
  listedRuns,
  removeExecution,
  removeSchedule,
  subjectSchedules,
} from './erasure-temporal.js';
import type { ErasureReport, ErasureState, ErasureStepResult, ErasureSubject } from './erasure-types.js';
import { emptyErasureReport, ERASED_KINDS } from './erasure-types.js';

export interface ErasureContext {
  sql: SqlStatements;
  temporal: Client;
  /** Called between pieces of work (an activity heartbeats here). */
  beat: () => void;
}

/** Batches of rows one step deletes at most. */
const BATCHES_PER_STEP = 8;
const TURN_PAGE = 500;

interface Ledger {
  id: string;
  subject: ErasureSubject | null;
  state: ErasureState;
  report: ErasureReport;
}

const parse = (value: unknown): unknown => (typeof value === 'string' ? JSON.parse(value) : value);

function initialErasureState(batchSize: number, subject: ErasureSubject): ErasureState {
  return {
    phase: 'schedules-plan',
    batchSize,
    version: 0,
    schedules: [],
    cursor: null,
    current: 'conversationId' in subject ? subject.conversationId : null,
    workflowMembers: [],
    rowMembers: [],
  };
}

/**
 * Writes a new erasure's ledger row. A row of this id already there is left as it is, unless it
 * is still running for another subject (an ArgumentError: the id names one erasure).
 */
export async function createErasure(
  sql: SqlStatements,
  erasureId: string,
  subject: ErasureSubject,
  batchSize: number,
): Promise<void> {
  const { param } = sql.dialect;
  const now = new Date().toISOString();
  await sql.batch([`conv:erasure:${erasureId}`], async (c) => {
    const [exists] = await c.query(`SELECT subject FROM turnkit_erasures WHERE id = ?`, [erasureId]);
    if (exists) {
      const theirs = parse(exists['subject']);
      if (theirs !== null && canonicalJson(theirs) !== canonicalJson(subject))
        throw new ArgumentError(`erasure ${erasureId} is erasing another subject`);
      return;
    }
    await c.query(
      `INSERT INTO turnkit_erasures (id, subject, state, report, created_at, updated_at)
        VALUES (?, ${param('json')}, ${param('json')}, ${param('json')}, ${param('time')}, ${param('time')})`,
      [
        erasureId,
        JSON.stringify(subject),
        JSON.stringify(initialErasureState(batchSize, subject)),
        JSON.stringify(emptyErasureReport(erasureId, subject, false)),
        now,
        now,
      ],
    );
  });
}

async function loadLedger(sql: SqlStatements, erasureId: string): Promise<Ledger> {
  const [row] = await sql.read(`SELECT subject, state, report FROM turnkit_erasures WHERE id = ?`, [
    erasureId,
  ]);
  if (!row) throw new RecordNotFound('erasure', erasureId);
  return {
    id: erasureId,
    subject: parse(row['subject']) as ErasureSubject | null,
    state: parse(row['state']) as ErasureState,
    report: parse(row['report']) as ErasureReport,
  };
}

/**
 * Saves the ledger's next state (and report) unless another attempt saved since this one
 * read it (then this attempt's work is redone from the newer state: an Error Temporal retries).
 */
async function save(sql: SqlStatements, ledger: Ledger, finished = false): Promise<void> {
  const { param } = sql.dialect;
  const read = ledger.state.version;
  const state = { ...ledger.state, version: read + 1 };
  await sql.batch([`conv:erasure:${ledger.id}`], async (c) => {
    const [row] = await c.query(`SELECT state FROM turnkit_erasures WHERE id = ?`, [ledger.id]);
    if ((parse(row?.['state']) as ErasureState | undefined)?.version !== read)
      throw new Error(`erasure ${ledger.id} moved on meanwhile: this step starts again`);
    const now = new Date().toISOString();
    await c.query(
      `UPDATE turnkit_erasures SET state = ${param('json')}, report = ${param('json')}, updated_at = ${param('time')}
        ${finished ? `, subject = NULL, completed_at = ${param('time')}` : ''} WHERE id = ?`,
      [JSON.stringify(state), JSON.stringify(ledger.report), now, ...(finished ? [now] : []), ledger.id],
    );
  });
  ledger.state = state;
}

/** A conversation's turn ids (with `open`, of the turns that have not ended), paged. */
async function* turnIdsOf(sql: SqlStatements, conversationId: string, open = false): AsyncIterable<string> {
  for (let after: string | null = null; ;) {
    const page = await turnIdsPage(sql, conversationId, after, TURN_PAGE, open);
    yield* page;
    if (page.length < TURN_PAGE) return;
    after = page[page.length - 1]!;
  }
}

/** The workflows and rows of one conversation's group, counted into `report`. */
async function countInto(
  ctx: ErasureContext,
  report: ErasureReport,
  group: readonly string[],
): Promise<void> {
  if (group.length === 0) return;
  const rows = await countGroup(ctx.sql, group);
  for (const kind of ERASED_KINDS) report.rows[kind] += rows[kind];
  for (const member of group)
    report.workflows += (
      await conversationWorkflowIds(ctx.temporal, member, turnIdsOf(ctx.sql, member), ctx.beat)
    ).size;
}

/** A schedule and its firings, counted into `report`. */
async function countSchedule(ctx: ErasureContext, report: ErasureReport, scheduleId: string): Promise<void> {
  report.schedules++;
  const runs = await listedRuns(ctx.temporal, firingRunsQuery(scheduleId), ctx.beat);
  report.workflows += new Set(runs.map((run) => run.workflowId)).size;
}

/**
 * Stops the group: its lanes first (no new turn starts), then its open turns, each terminated
 * and deleted (Temporal does both in one step for an open execution).
 */
async function stopGroup(ctx: ErasureContext, group: readonly string[]): Promise<void> {
  for (const member of group) await removeExecution(ctx.temporal, { workflowId: laneWorkflowId(member) });
  for (const member of group)
    for await (const turnId of turnIdsOf(ctx.sql, member, true)) {
      await removeExecution(ctx.temporal, { workflowId: turnWorkflowId(turnId) });
      ctx.beat();
    }
}

/** Deletes every workflow execution of a conversation (each run visibility lists, then by id). */
async function removeConversationWorkflows(ctx: ErasureContext, conversationId: string): Promise<void> {
  for (const run of await listedRuns(ctx.temporal, conversationRunsQuery(conversationId), ctx.beat)) {
    await removeExecution(ctx.temporal, run);
    ctx.beat();
  }
  for await (const turnId of turnIdsOf(ctx.sql, conversationId)) {
    await removeExecution(ctx.temporal, { workflowId: turnWorkflowId(turnId) });
    ctx.beat();
  }
  await removeExecution(ctx.temporal, { workflowId: laneWorkflowId(conversationId) });
}

/** One step; `{ done: true }` with the report once the erasure has finished. */
export async function erasureStep(ctx: ErasureContext, erasureId: string): Promise<ErasureStepResult> {
  const ledger = await loadLedger(ctx.sql, erasureId);
  const { state, report } = ledger;
  if (state.phase === 'done') return { done: true, report };
  if (ledger.subject === null) throw new ConfigError(`erasure ${erasureId} has no subject`);
  const subject = ledger.subject;
  switch (state.phase) {
    case 'schedules-plan': {
      state.schedules = await subjectSchedules(ctx.temporal, subject, ctx.beat);
      for (const id of state.schedules) await countSchedule(ctx, report, id);
      state.phase = 'schedules';
      break;
    }
    case 'schedules': {
      const [id] = state.schedules;
      if (id !== undefined) {
        // The schedule first: no firing starts while its firings are deleted.
        await removeSchedule(ctx.temporal, id);
        for (const run of await listedRuns(ctx.temporal, firingRunsQuery(id), ctx.beat))
          await removeExecution(ctx.temporal, run);
        state.schedules = state.schedules.slice(1);
      }
      if (state.schedules.length === 0) state.phase = 'find';
      break;
    }
    case 'find':
      await findStep(ctx, ledger, subject);
      break;
    case 'plan': {
      const group = await groupOf(ctx.sql, state.current!);
      await countInto(ctx, report, group);
      state.workflowMembers = group;
      state.rowMembers = group;
      state.phase = 'stop';
      break;
    }
    case 'stop':
      await stopGroup(ctx, state.workflowMembers);
      state.phase = 'workflows';
      break;
    case 'workflows': {
      const [member] = state.workflowMembers;
      if (member !== undefined) await removeConversationWorkflows(ctx, member);
      state.workflowMembers = state.workflowMembers.slice(1);
      if (state.workflowMembers.length === 0) state.phase = 'rows';
      break;
    }
    case 'rows':
      if (!(await rowsStep(ctx, ledger, subject))) return { done: false };
      break;
  }
  // Read through the ledger: the switch narrowed `state.phase` to the phases it started in.
  const finished = ledger.state.phase === 'done';
  await save(ctx.sql, ledger, finished);
  return finished ? { done: true, report } : { done: false };
}

/** The next of a principal's conversations (or the one conversation, once). */
async function findStep(ctx: ErasureContext, ledger: Ledger, subject: ErasureSubject): Promise<void> {
  const { state } = ledger;
  if (!('principal' in subject)) {
    // A conversation's erasure finds its one group, once (`current` was set at the start).
    state.phase = state.current === null ? 'done' : 'plan';
    return;
  }
  const page = await findPrincipalConversation(ctx.sql, subject.principal, state.cursor);
  if (page.found) {
    state.cursor = page.found;
    state.current = page.found.id;
    state.phase = 'plan';
  } else if (page.next) state.cursor = page.next;
  else state.phase = 'done';
}

/** A batch or more of the group's rows; false while the first member still has rows (nothing to save). */
async function rowsStep(ctx: ErasureContext, ledger: Ledger, subject: ErasureSubject): Promise<boolean> {
  const { state } = ledger;
  const [member] = state.rowMembers;
  if (member !== undefined) {
    const emptied = await deleteConversationRows(
      ctx.sql,
      member,
      state.batchSize,
      BATCHES_PER_STEP,
      ctx.beat,
    );
    if (!emptied) return false;
    state.rowMembers = state.rowMembers.slice(1);
  }
  if (state.rowMembers.length === 0) {
    state.current = null;
    state.phase = 'principal' in subject ? 'find' : 'done';
  }
  return true;
}

/**
 * What an erasure of `subject` would remove, counted the way a real one counts, writing
 * nothing. Conversations already counted in an earlier group are not counted again.
 */
export async function planErasure(ctx: ErasureContext, subject: ErasureSubject): Promise<ErasureReport> {
  const report = emptyErasureReport('dry-run', subject, true);
  for (const id of await subjectSchedules(ctx.temporal, subject, ctx.beat))
    await countSchedule(ctx, report, id);
  const seen = new Set<string>();
  const countGroupOf = async (root: string) => {
    const group = (await groupOf(ctx.sql, root)).filter((id) => !seen.has(id));
    for (const id of group) seen.add(id);
    await countInto(ctx, report, group);
  };
  if (!('principal' in subject)) {
    await countGroupOf(subject.conversationId);
    return report;
  }
  let cursor: ErasureState['cursor'] = null;
  for (;;) {
    const page = await findPrincipalConversation(ctx.sql, subject.principal, cursor);
    if (page.found) {
      if (!seen.has(page.found.id)) await countGroupOf(page.found.id);
      cursor = page.found;
    } else if (page.next) cursor = page.next;
    else return report;
  }
}
