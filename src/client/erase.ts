/**
 * `client.erase({ principal })` and `client.erase({ conversationId })` (decision 78): checks the
 * subject, asks the authorization policy (action `erase`), writes the erasure's ledger row and
 * runs the erasure workflow on the client's task queue, returning its report. A dry run counts
 * what would go, here in the client, and writes nothing anywhere.
 */
import type { Client } from '@temporalio/client';
import { WorkflowExecutionAlreadyStartedError } from '@temporalio/client';
import type { Runtime } from '../engine/runtime.js';
import { createErasure, planErasure } from '../erasure/erasure-steps.js';
import type { ErasureReport, ErasureSubject } from '../erasure/erasure-types.js';
import { ArgumentError, ConfigError, RecordNotFound } from '../errors.js';
import { newId } from '../ids.js';
import { SqlStore } from '../store/sql/sql-store.js';
import type { Json, Store } from '../store/types.js';
import type { erasureWorkflow } from '../workflows/erasure-workflow.js';

export type { ErasedKind, ErasureReport, ErasureSubject } from '../erasure/erasure-types.js';

export interface EraseOptions {
  /** Count what would go; remove nothing, start no workflow. */
  dryRun?: boolean;
  /** Who erases: the principal the policy is asked about (action `erase`); absent: `null`. */
  by?: Json;
  /**
   * The erasure's id (`erasure_…`). Give the id of an earlier erasure (say, from before a crash)
   * to wait for it again: a completed one answers with its report, one that was terminated or
   * failed runs again from where its ledger row stands. Default: a new id.
   */
  erasureId?: string;
  /** Rows per delete transaction (1–10,000); default 500. */
  batchSize?: number;
}

export interface EraseDeps {
  store: Store;
  temporal: Client;
  taskQueue: string;
  runtime: Runtime;
}

const ERASURE_WORKFLOW_ID_PREFIX = 'turnkit-erase-';

/** The erasure workflow's id. */
function erasureWorkflowId(erasureId: string): string {
  return `${ERASURE_WORKFLOW_ID_PREFIX}${erasureId}`;
}

function checkSubject(subject: unknown): ErasureSubject {
  if (!subject || typeof subject !== 'object' || Array.isArray(subject))
    throw new ArgumentError('erase needs { principal } or { conversationId }');
  const given = subject as Record<string, unknown>;
  const keys = Object.keys(given).filter((key) => given[key] !== undefined);
  if (keys.length !== 1 || (keys[0] !== 'principal' && keys[0] !== 'conversationId'))
    throw new ArgumentError(
      `erase needs exactly one of principal and conversationId, got ${keys.length > 0 ? keys.join(', ') : 'neither'}`,
    );
  if (keys[0] === 'conversationId') {
    if (typeof given['conversationId'] !== 'string' || given['conversationId'] === '')
      throw new ArgumentError('erase: conversationId must be a non-empty string');
    return { conversationId: given['conversationId'] };
  }
  if (given['principal'] === null) throw new ArgumentError('erase: the principal must not be null');
  let principal: Json;
  try {
    principal = JSON.parse(JSON.stringify(given['principal'])) as Json;
  } catch (error) {
    throw new ArgumentError(`erase: the principal must be JSON: ${(error as Error).message}`);
  }
  return { principal };
}

function checkOptions(options: EraseOptions): { batchSize: number; erasureId: string } {
  const batchSize = options.batchSize ?? 500;
  if (!Number.isInteger(batchSize) || batchSize < 1 || batchSize > 10_000)
    throw new ArgumentError(
      `erase: batchSize must be a whole number from 1 to 10000, got ${String(batchSize)}`,
    );
  const erasureId = options.erasureId ?? newId('erasure');
  if (typeof erasureId !== 'string' || !/^erasure_[0-9a-f]{1,64}$/.test(erasureId))
    throw new ArgumentError(
      `erase: erasureId must be an id erase made (erasure_…), got ${JSON.stringify(erasureId)}`,
    );
  return { batchSize, erasureId };
}

/** What the policy sees: the subject (and, for a conversation, the principal it runs for). */
async function authorizeErase(
  deps: EraseDeps,
  subject: ErasureSubject,
  options: EraseOptions,
): Promise<void> {
  let resources: Record<string, unknown>;
  if ('principal' in subject) resources = { subject: 'principal', erased_principal: subject.principal };
  else {
    const owner = await deps.store.loadConversation(subject.conversationId).then(
      (conversation) => conversation.metadata['principal'] ?? null,
      (error: unknown) => {
        if (error instanceof RecordNotFound) return null;
        throw error;
      },
    );
    resources = { subject: 'conversation', conversation: subject.conversationId, owner };
  }
  await deps.runtime.authorize('erase', options.by === undefined ? null : options.by, {
    ...resources,
    dry_run: options.dryRun === true,
  });
}

export async function erase(
  deps: EraseDeps,
  given: unknown,
  options: EraseOptions = {},
): Promise<ErasureReport> {
  const subject = checkSubject(given);
  const { batchSize, erasureId } = checkOptions(options ?? {});
  const { store } = deps;
  if (!(store instanceof SqlStore))
    throw new ConfigError(
      `erasure needs one of TurnKit's own stores (SQLite, PostgreSQL, memory), not a ${store.backend} store of another implementation`,
    );
  await authorizeErase(deps, subject, options);
  const sql = store.statements();
  if (options.dryRun) return planErasure({ sql, temporal: deps.temporal, beat: () => undefined }, subject);
  await createErasure(sql, erasureId, subject, batchSize);
  const workflowId = erasureWorkflowId(erasureId);
  try {
    const handle = await deps.temporal.workflow.start<typeof erasureWorkflow>('erasureWorkflow', {
      workflowId,
      taskQueue: deps.taskQueue,
      args: [{ erasureId, storeId: store.identity.id }],
      // Running: wait for it. Completed: its result (below). Failed or terminated: run again,
      // from where its ledger row stands.
      workflowIdConflictPolicy: 'USE_EXISTING',
      workflowIdReusePolicy: 'ALLOW_DUPLICATE_FAILED_ONLY',
      staticSummary: `TurnKit erasure ${erasureId}`,
    });
    return await handle.result();
  } catch (error) {
    // Started before and completed: its result is the report.
    if (!(error instanceof WorkflowExecutionAlreadyStartedError)) throw error;
    return deps.temporal.workflow.getHandle<typeof erasureWorkflow>(workflowId).result();
  }
}
