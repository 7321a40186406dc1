/**
 * `pruneStore`: one retention pass over a SQL store (decision 64). Stream parts, then events,
 * then whole conversations, each walked oldest first and deleted a batch per transaction.
 * Run it as often as you like: a pass that stops halfway leaves rows the next one removes.
 */
import { ConfigError } from '../../errors.js';
import { SqlStore } from '../sql/sql-store.js';
import type { Store } from '../types.js';
import { pruneConversations } from './conversation-retention.js';
import { pruneEvents } from './event-retention.js';
import type { PruneReport, PrunedKind } from './prune-pass.js';
import { PrunePass } from './prune-pass.js';
import type { RetentionPolicy } from './retention-policy.js';
import { resolveRetentionPolicy } from './retention-policy.js';
import { pruneStreamParts } from './stream-part-retention.js';

export interface PruneOptions {
  /** Count what would leave; write nothing. */
  dryRun?: boolean;
  /** The pass's clock (tests); default now. */
  now?: Date;
  /** Called after every batch that deleted rows (an activity heartbeats here). */
  onBatch?: (report: PruneReport) => void;
}

export async function pruneStore(
  store: Store,
  policy: RetentionPolicy = {},
  options: PruneOptions = {},
): Promise<PruneReport> {
  const resolved = resolveRetentionPolicy(policy);
  if (!(store instanceof SqlStore))
    throw new ConfigError(
      `retention runs on the SQLite and PostgreSQL stores, not on the ${store.backend} store`,
    );
  const now = (options.now ?? new Date()).getTime();
  const pass = new PrunePass(
    store.statements(),
    resolved.batchSize,
    options.dryRun ?? false,
    options.onBatch,
  );
  if (resolved.streamPartsGraceMs !== null) pass.cutoffs.streamParts = now - resolved.streamPartsGraceMs;
  if (resolved.eventsMaxAgeMs !== null) pass.cutoffs.events = now - resolved.eventsMaxAgeMs;
  if (pass.cutoffs.streamParts !== null) await pruneStreamParts(pass, pass.cutoffs.streamParts);
  if (pass.cutoffs.events !== null) await pruneEvents(pass, pass.cutoffs.events);
  if (resolved.conversationsMaxAgeMs !== null || resolved.conversationsKeepLatest !== null) {
    await pruneConversations(pass, {
      inactiveBeforeMs: resolved.conversationsMaxAgeMs === null ? null : now - resolved.conversationsMaxAgeMs,
      keepLatest: resolved.conversationsKeepLatest,
    });
  }
  if (resolved.vacuum && !pass.dryRun && pass.sql.dialect.name === 'postgres') await vacuum(pass);
  return pass.report;
}

const TABLES: Record<PrunedKind, string> = {
  streamParts: 'turnkit_stream_parts',
  events: 'turnkit_events',
  conversations: 'turnkit_conversations',
  messages: 'turnkit_messages',
  turns: 'turnkit_turns',
  toolExecutions: 'turnkit_tool_executions',
  deliveries: 'turnkit_deliveries',
  waits: 'turnkit_waits',
};

/**
 * `VACUUM (ANALYZE)` of each table the pass deleted from, one at a time, outside any
 * transaction: it takes no lock that stops reads or writes (decision 64's note on space).
 */
async function vacuum(pass: PrunePass): Promise<void> {
  for (const [kind, table] of Object.entries(TABLES) as [PrunedKind, string][]) {
    if (pass.report.deleted[kind] === 0) continue;
    await pass.sql.read(`VACUUM (ANALYZE) ${table}`);
    pass.report.vacuumed.push(table);
  }
}
