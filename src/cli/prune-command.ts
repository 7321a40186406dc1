/**
 * `turnkit prune [--dry-run]`: one retention pass over the store (decision 64,
 * docs/retention.md). Only the store is opened: no Temporal, no agents module needed.
 */
import { msToNumber } from '@temporalio/common/lib/time.js';
import type { Command } from 'commander';
import type { PruneReport, PrunedKind } from '../store/retention/prune-pass.js';
import { pruneStore } from '../store/retention/prune-store.js';
import type { RetentionPolicy } from '../store/retention/retention-policy.js';
import type { Store } from '../store/types.js';
import { CliError } from './project.js';
import { EXIT_CODES, jsonText, write } from './render.js';
import type { ScheduleCommandContext } from './schedule-commands.js';

interface PruneFlags {
  dryRun?: boolean;
  streamGrace: string;
  eventsAge?: string;
  conversationsAge?: string;
  keepConversations?: string;
  batchSize?: string;
  vacuum?: boolean;
}

/** Runs a command with the store alone. */
export type WithStore = <A extends unknown[]>(
  fn: (store: Store, ...args: A) => Promise<number | void>,
) => (...args: A) => Promise<void>;

const KINDS: readonly [PrunedKind, string][] = [
  ['streamParts', 'stream parts'],
  ['events', 'events'],
  ['conversations', 'conversations'],
  ['messages', 'messages'],
  ['turns', 'turns'],
  ['toolExecutions', 'tool executions'],
  ['deliveries', 'deliveries'],
  ['waits', 'waits'],
];

function durationFlag(flag: string, value: string | undefined): number | null | undefined {
  if (value === undefined) return undefined;
  if (value === 'never') return null;
  let ms = Number.NaN;
  try {
    ms = /^\d+$/.test(value) ? Number(value) : msToNumber(value as `${number}s`);
  } catch {
    // Reported below.
  }
  if (!Number.isFinite(ms) || ms < 0)
    throw new CliError(
      `${flag} must be a duration (ms, or a string like '30 days'), or 'never', got ${value}`,
      EXIT_CODES.usage,
    );
  return ms;
}

function countFlag(flag: string, value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  if (!/^\d+$/.test(value))
    throw new CliError(`${flag} must be a whole number, got ${value}`, EXIT_CODES.usage);
  return Number(value);
}

function policyOfFlags(flags: PruneFlags): RetentionPolicy {
  const policy: RetentionPolicy = {};
  const grace = durationFlag('--stream-grace', flags.streamGrace);
  if (grace !== undefined) policy.streamPartsGraceMs = grace;
  const events = durationFlag('--events-age', flags.eventsAge);
  if (events !== undefined) policy.eventsMaxAgeMs = events;
  const conversations = durationFlag('--conversations-age', flags.conversationsAge);
  if (conversations !== undefined) policy.conversationsMaxAgeMs = conversations;
  const keep = countFlag('--keep-conversations', flags.keepConversations);
  if (keep !== undefined) policy.conversationsKeepLatest = keep;
  const batch = countFlag('--batch-size', flags.batchSize);
  if (batch !== undefined) policy.batchSize = batch;
  if (flags.vacuum) policy.vacuum = true;
  return policy;
}

function summary(report: PruneReport): string {
  const verb = report.dryRun ? 'would remove' : 'removed';
  const parts = KINDS.filter(([kind]) => report.deleted[kind] > 0).map(
    ([kind, noun]) => `${report.deleted[kind]} ${noun}`,
  );
  const kept =
    report.keptConversations > 0
      ? `; kept ${report.keptConversations} conversation${report.keptConversations === 1 ? '' : 's'} with unfinished or shared turns`
      : '';
  const vacuumed = report.vacuumed.length > 0 ? `; vacuumed ${report.vacuumed.join(', ')}` : '';
  return `prune ${verb} ${parts.length > 0 ? parts.join(', ') : 'nothing'}${kept}${vacuumed}\n`;
}

export function addPruneCommand(program: Command, ctx: ScheduleCommandContext, withStore: WithStore): void {
  program
    .command('prune')
    .description('remove the stream parts, events and conversations the retention policy no longer keeps')
    .option('--dry-run', 'count what would be removed, change nothing')
    .option(
      '--stream-grace <duration>',
      "stream parts leave this long after their run ended ('never': kept)",
      '1h',
    )
    .option('--events-age <duration>', 'events of finished turns leave at this age (default: kept)')
    .option(
      '--conversations-age <duration>',
      'finished conversations leave after this long idle (default: kept)',
    )
    .option('--keep-conversations <n>', 'keep only the newest n conversations (default: all)')
    .option('--batch-size <n>', 'rows deleted per transaction (default 500)')
    .option('--vacuum', 'PostgreSQL: VACUUM (ANALYZE) the tables the pass deleted from')
    .action(
      withStore(async (store, flags: PruneFlags) => {
        const report = await pruneStore(store, policyOfFlags(flags), { dryRun: flags.dryRun === true });
        if (ctx.json()) return void write(ctx.out, `${jsonText(report)}\n`);
        write(ctx.out, summary(report));
      }),
    );
}
