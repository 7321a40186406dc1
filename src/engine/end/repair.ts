/**
 * Repair of turns whose workflow is gone without the turn's terminal write
 * (docs/decisions/033-repair-vanished-workflows.md): TurnKit's reconciler, with Temporal as the
 * only source of truth about runs. A turn is looked at only when something waits on it — the lane step for the turns that hold
 * its lane, a refused claim for the turn that blocks it, `turnkit repair` for a whole store —
 * and Temporal is asked (describe `turnkit-turn-<turnId>`) whether its workflow is still open.
 * No timer, no scan loop, no lock of our own: the store's locks fence the write.
 *
 * - Workflow closed (terminated, timed out, failed, or completed without writing), or not found
 *   for a turn that ran: the turn fails with `TurnKit::WorkflowClosed` and the workflow's fate
 *   as message; its open tool executions are interrupted, each call gets its one result; the
 *   turns waiting on it and its lane hear of it as of any terminal write.
 * - Never started (a root turn submitted, no workflow: its start failed after `ask()`/`start()`
 *   committed it): its workflow is started, as `start(turnId)` would (the same idempotent
 *   signal-with-start the lane uses). A sub-agent's workflow is its parent's to start.
 * - `not found` proves nothing by itself: asked in the wrong namespace or cluster, every turn
 *   is not found. It is acted on only where this namespace is known to run the store's
 *   workflows: inside a worker (the lane or turn asking is one of them), or when Temporal
 *   finds some other workflow of the store here; otherwise the turn is held (reported,
 *   untouched), and only `failMissing` fails a held turn that ran.
 */
import type { Client } from '@temporalio/client';
import { WorkflowNotFoundError } from '@temporalio/client';
import { LANE_TURN_STATUSES } from '../../store/types.js';
import type { TurnRecord, TurnStatus } from '../../store/types.js';
import type { TurnSettings } from '../../workflows/contract.js';
import { turnWorkflowId } from '../../workflows/contract.js';
import type { Runtime } from '../runtime.js';
import { failVanished } from './fail-vanished.js';
import { storeSeenHere, unfinishedSubmittedTurns } from './repair-scope.js';
import { startOrNudgeTurn } from './workflow-start.js';

/** Where repair runs: a worker's activity, the client, the CLI. */
export interface RepairContext {
  runtime: Runtime;
  temporal: Client;
  /** The task queue of the workflows it starts (turns, lanes). */
  taskQueue: string;
  /** Settings of the turns and lanes it starts. */
  settings?: TurnSettings | undefined;
  /**
   * True inside a worker: the workflow asking runs in this namespace, so the store's
   * workflows do, and `not found` means gone. Otherwise (the client, the CLI) repair first
   * looks for evidence (see `repairTurns`).
   */
  namespaceKnown?: boolean;
}

/** How `repairTurns` runs. */
export interface RepairOptions {
  /** Only diagnose: nothing is written or started. */
  dryRun?: boolean;
  /**
   * Fail a turn that ran and whose workflow is not found even when nothing confirms that this
   * namespace runs the store's workflows (say, every workflow is past its retention).
   */
  failMissing?: boolean;
  /** Turns read from the store at a time (`repairStore`; default 200). */
  pageSize?: number;
  /** Temporal describes (and repairs) in flight at once (default 8). */
  concurrency?: number;
}

const PAGE_SIZE = 200;
const CONCURRENCY = 8;

/** What repair found about one turn, and what it did (or, in a dry run, would do). */
export interface RepairFinding {
  turnId: string;
  conversationId: string;
  status: TurnStatus;
  /** What Temporal said about the turn's workflow: `terminated`, `timed out`, `not found`, … */
  workflow: string;
  /**
   * `fail`: the turn fails with WorkflowClosed; `start`: its workflow is started; `hold`:
   * nothing is done, `held` says why (its workflow is not found, and nothing confirms that
   * this namespace runs the store's workflows).
   */
  action: 'fail' | 'start' | 'hold';
  /** False in a dry run, for a held turn, or when the row changed before the write. */
  done: boolean;
  /** Why a turn is held. */
  held?: string;
}

/** Temporal's closed statuses, as the turn's error message names them. */
const CLOSED: Readonly<Record<string, string>> = {
  COMPLETED: 'completed',
  FAILED: 'failed',
  CANCELLED: 'cancelled',
  TERMINATED: 'terminated',
  TIMED_OUT: 'timed out',
};

/**
 * The turn workflow's fate: `open` (running, or anything Temporal does not call closed),
 * a closed status (`terminated`, `timed out`, …) or `not found`.
 */
async function turnWorkflowFate(temporal: Client, turnId: string): Promise<string> {
  try {
    const { status } = await temporal.workflow.getHandle(turnWorkflowId(turnId)).describe();
    return CLOSED[status.name] ?? 'open';
  } catch (error) {
    if (error instanceof WorkflowNotFoundError) return 'not found';
    throw error;
  }
}

/** What repair would do with `turn`, by its row and Temporal's answer; null: nothing. */
export async function diagnoseTurn(temporal: Client, turn: TurnRecord): Promise<RepairFinding | null> {
  if (!repairable(turn)) return null;
  return findingFor(turn, await turnWorkflowFate(temporal, turn.id));
}

/** Only submitted turns have a workflow; an inline turn or a finished one is not ours. */
function repairable(turn: TurnRecord): boolean {
  return turn.submittedAt !== null && LANE_TURN_STATUSES.includes(turn.status);
}

/** What repair would do with a repairable `turn` whose workflow's fate is `workflow`. */
function findingFor(turn: TurnRecord, workflow: string): RepairFinding | null {
  if (workflow === 'open') return null;
  const finding = { turnId: turn.id, conversationId: turn.conversationId, status: turn.status, workflow };
  if (workflow === 'not found' && neverRan(turn)) {
    return turn.parentTurnId === null ? { ...finding, action: 'start', done: false } : null;
  }
  return { ...finding, action: 'fail', done: false };
}

function neverRan(turn: TurnRecord): boolean {
  return turn.claimToken === null && turn.startedAt === null && turn.status !== 'running';
}

/** Carries out a finding (see `diagnoseTurn`); `done` says whether it wrote or started. */
export async function applyFinding(
  context: RepairContext,
  turn: TurnRecord,
  finding: RepairFinding,
): Promise<RepairFinding> {
  if (finding.action === 'hold') return { ...finding, done: false };
  if (finding.action === 'start') {
    await startOrNudgeTurn(context, turn);
    return { ...finding, done: true };
  }
  return { ...finding, done: await failVanished(context, turn, finding.workflow) };
}

/**
 * Diagnoses each turn and, unless `dryRun`, repairs it. Outside a worker, a `not found` is
 * acted on only when Temporal finds some workflow of the store in this namespace (one of
 * these turns', or another of the same conversations); otherwise those turns are held, and
 * `failMissing` fails the held ones that ran.
 */
export async function repairTurns(
  context: RepairContext,
  turns: readonly TurnRecord[],
  options: RepairOptions = {},
): Promise<RepairFinding[]> {
  const sweep = new RepairSweep(context, options);
  await sweep.page(turns);
  return sweep.finish();
}

/**
 * `turnkit repair`: every unfinished submitted turn of the store, a page at a time, each
 * page's describes and repairs run concurrently under a bound (audit finding 24). A turn held
 * on one page is repaired once a later page confirms the namespace.
 */
export async function repairStore(
  context: RepairContext,
  options: RepairOptions = {},
): Promise<RepairFinding[]> {
  const sweep = new RepairSweep(context, options);
  for await (const page of unfinishedSubmittedTurns(context.runtime, options.pageSize ?? PAGE_SIZE))
    await sweep.page(page);
  return sweep.finish();
}

/** One repair run over pages of turns: whether the namespace is confirmed carries across pages. */
class RepairSweep {
  readonly #findings: RepairFinding[] = [];
  /** `not found` turns held while nothing confirmed the namespace, kept in case a later page does. */
  readonly #unconfirmed: { index: number; turn: TurnRecord; finding: RepairFinding }[] = [];
  #known: boolean;

  constructor(
    private readonly context: RepairContext,
    private readonly options: RepairOptions,
  ) {
    this.#known = context.namespaceKnown === true;
  }

  async page(turns: readonly TurnRecord[]): Promise<void> {
    const { context, options } = this;
    const bound = options.concurrency ?? CONCURRENCY;
    const diagnosed = await boundedMap(turns.filter(repairable), bound, async (turn) => ({
      turn,
      workflow: await turnWorkflowFate(context.temporal, turn.id),
    }));
    const missing = diagnosed.filter((d) => d.workflow === 'not found');
    if (!this.#known && missing.length > 0)
      this.#known =
        missing.length < diagnosed.length ||
        (await storeSeenHere(
          context,
          missing.map((d) => d.turn),
        ));
    const planned = diagnosed.flatMap(({ turn, workflow }) => {
      const finding = findingFor(turn, workflow);
      return finding ? [{ turn, finding }] : [];
    });
    const done = await boundedMap(planned, bound, ({ turn, finding }) =>
      this.#apply(
        turn,
        this.#known || finding.workflow !== 'not found' ? finding : held(finding, context, options),
      ),
    );
    planned.forEach(({ turn, finding }, i) => {
      if (!this.#known && finding.workflow === 'not found' && done[i]!.action === 'hold')
        this.#unconfirmed.push({ index: this.#findings.length + i, turn, finding });
    });
    this.#findings.push(...done);
  }

  /** The findings in the order the turns came; held ones repaired if the namespace was confirmed since. */
  async finish(): Promise<RepairFinding[]> {
    if (this.#known && this.#unconfirmed.length > 0) {
      const bound = this.options.concurrency ?? CONCURRENCY;
      const redone = await boundedMap(this.#unconfirmed, bound, ({ turn, finding }) =>
        this.#apply(turn, finding),
      );
      this.#unconfirmed.forEach(({ index }, i) => (this.#findings[index] = redone[i]!));
    }
    return this.#findings;
  }

  #apply(turn: TurnRecord, finding: RepairFinding): Promise<RepairFinding> {
    if (this.options.dryRun || finding.action === 'hold') return Promise.resolve(finding);
    return applyFinding(this.context, turn, finding);
  }
}

/** `fn` over `items` with at most `bound` calls in flight; results in the items' order. */
async function boundedMap<T, R>(
  items: readonly T[],
  bound: number,
  fn: (item: T) => Promise<R>,
): Promise<R[]> {
  const results: R[] = new Array<R>(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const index = next++;
      results[index] = await fn(items[index]!);
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(bound, items.length)) }, worker));
  return results;
}

/** A `not found` finding where nothing confirms the namespace: held, unless `failMissing`. */
function held(finding: RepairFinding, context: RepairContext, options: RepairOptions): RepairFinding {
  if (finding.action === 'fail' && options.failMissing) return finding;
  const namespace = context.temporal.options.namespace;
  return {
    ...finding,
    action: 'hold',
    held:
      `no workflow of this store is found in namespace ${namespace} (wrong namespace or cluster?)` +
      (finding.action === 'fail'
        ? '; --fail-missing fails it anyway'
        : '; start(turnId) starts it where its workers run'),
  };
}
