/**
 * Thin Temporal adapters over the engine. Each activity takes ids, does its I/O through the
 * store, and returns a small digest; errors are mapped onto Temporal failures on purpose.
 */
import { Context } from '@temporalio/activity';
import { ApplicationFailure, WorkflowExecutionAlreadyStartedError } from '@temporalio/common';
import { authorizeCancel, cancelTurn, rejectCancel } from '../engine/cancel.js';
import type { CancelDescendants, CancelRequest } from '../engine/cancel-request.js';
import { claimTurn } from '../engine/claim.js';
import type {
  ClaimDigest,
  ModelStepDigest,
  OutputStepDigest,
  StepInput,
  TerminalNotice,
  ToolCallOutcome,
  TurnDigest,
  TurnErrorDigest,
} from '../engine/digest.js';
import { runModelStep } from '../engine/model-step.js';
import type { ModelStepInput } from '../engine/model-step.js';
import { runOutputStep } from '../engine/output-step.js';
import { retryWhileStoreDown } from '../engine/store-outage.js';
import type { Runtime } from '../engine/runtime.js';
import { failTurn } from '../engine/terminal.js';
import { finishToolsPhase, resumeTurn, runToolCall, suspendTurn, turnStatus } from '../engine/tool-runner.js';
import type { ToolCallInput } from '../engine/tool-runner.js';
import { TurnKitError } from '../errors.js';
import { laneStep } from '../engine/messaging.js';
import { waitsReady } from '../store/wait-graph.js';
import { claimTokenOf, laneWorkflowId, SIGNALS, turnWorkflowId } from '../workflows/search-attributes.js';
import type { TurnWorkflowInput } from '../workflows/turn-workflow.js';

/** Heartbeat period of long activities; the workflow's heartbeatTimeout is a few of these. */
export const HEARTBEAT_INTERVAL_MS = 500;

/**
 * TurnKit errors become ApplicationFailures typed by class name, non-retryable unless the
 * error says a retry could help; anything else is an infrastructure failure Temporal retries.
 */
export function toFailure(error: unknown): unknown {
  if (error instanceof TurnKitError) {
    return ApplicationFailure.create({
      type: error.name,
      message: error.message,
      nonRetryable: !error.retryable,
      details: error.details ? [error.details] : [],
      cause: error.cause instanceof Error ? error.cause : undefined,
    });
  }
  return error;
}

async function mapped<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (error) {
    throw toFailure(error);
  }
}

/** Heartbeats on an interval while `fn` runs, so a dead or paused worker is noticed. */
async function withHeartbeat<T>(fn: (heartbeat: (details?: unknown) => void) => Promise<T>): Promise<T> {
  const context = Context.current();
  const heartbeat = (details?: unknown) => context.heartbeat(details);
  const timer = setInterval(heartbeat, HEARTBEAT_INTERVAL_MS);
  try {
    return await fn(heartbeat);
  } finally {
    clearInterval(timer);
  }
}

/** Settings every turn started from a lane carries (activity timeouts and retries). */
type LaneSettings = TurnWorkflowInput['settings'];

/**
 * Starts the turn's workflow, or nudges it when it already runs (waiting for its lane):
 * signal-with-start on the fixed workflow id, so a turn never runs twice.
 */
async function startOrNudgeTurn(turnId: string, settings: LaneSettings): Promise<void> {
  const context = Context.current();
  await context.client.workflow
    .signalWithStart('turnWorkflow', {
      workflowId: turnWorkflowId(turnId),
      taskQueue: context.info.taskQueue,
      args: [{ turnId, ...(settings ? { settings } : {}) }],
      signal: SIGNALS.laneFree,
      signalArgs: [],
      workflowIdReusePolicy: 'REJECT_DUPLICATE',
    })
    .catch((error: unknown) => {
      // Closed already: the turn ran; there is nothing to start.
      if (error instanceof WorkflowExecutionAlreadyStartedError) return;
      throw error;
    });
}

export function createTurnActivities(runtime: Runtime) {
  return {
    /** One step of a conversation's lane: deliver, wake, and start the turn whose time it is. */
    async laneStep(input: { conversationId: string; settings?: LaneSettings }): Promise<{
      delivered: number;
      woke: string | null;
      started: string | null;
    }> {
      return mapped(async () => {
        const step = await laneStep(runtime, input.conversationId);
        if (step.next) await startOrNudgeTurn(step.next.id, input.settings);
        return { delivered: step.delivered, woke: step.woke, started: step.next?.id ?? null };
      });
    },

    /** Wakes the lanes of these conversations (signal-with-start of their lane workflows). */
    async wakeLanes(input: { conversationIds: string[]; settings?: LaneSettings }): Promise<void> {
      return mapped(async () => {
        const context = Context.current();
        for (const conversationId of input.conversationIds) {
          await context.client.workflow.signalWithStart('laneWorkflow', {
            workflowId: laneWorkflowId(conversationId),
            taskQueue: context.info.taskQueue,
            args: [{ conversationId, ...(input.settings ? { settings: input.settings } : {}) }],
            signal: SIGNALS.wake,
            signalArgs: [],
          });
        }
      });
    },

    /** Whether every wait target of the turn is finished. */
    async waitsReady(input: { turnId: string }): Promise<{ ready: boolean }> {
      return mapped(async () => ({ ready: await waitsReady(runtime.store, input.turnId) }));
    },

    async claimTurn(input: StepInput): Promise<ClaimDigest> {
      // Only the open run of the turn's own workflow, whose run id is the token, may take over
      // a claim that an ended run (reset, terminated) still holds.
      const run = Context.current().info.workflowExecution;
      const supersede =
        run?.workflowId === turnWorkflowId(input.turnId) && claimTokenOf(run.runId) === input.claimToken;
      return mapped(() =>
        claimTurn(runtime, input.turnId, input.claimToken, {
          supersede,
          ...(input.progress !== undefined ? { progress: input.progress } : {}),
        }),
      );
    },

    async modelStep(input: ModelStepInput): Promise<ModelStepDigest> {
      const signal = Context.current().cancellationSignal;
      // A store outage waits inside the attempt instead of using up the model's attempts.
      return mapped(() =>
        withHeartbeat((heartbeat) =>
          retryWhileStoreDown(() => runModelStep(runtime, input, { signal, heartbeat }), { signal }),
        ),
      );
    },

    async toolCall(input: ToolCallInput & { maxAttempts: number }): Promise<ToolCallOutcome> {
      const context = Context.current();
      const attempt = context.info.attempt;
      const signal = context.cancellationSignal;
      // A store outage re-dispatches the call inside this attempt (a finished execution keeps
      // its result; a running one is re-run only if replay-safe) instead of using up the
      // tool's few attempts.
      return mapped(() =>
        withHeartbeat((heartbeat) =>
          retryWhileStoreDown(
            () =>
              runToolCall(runtime, input, {
                signal,
                heartbeat,
                attempt,
                canRetry: attempt < input.maxAttempts,
              }),
            { signal },
          ),
        ),
      );
    },

    async finishTools(input: StepInput & { terminalToolCallId: string | null }): Promise<TurnDigest> {
      return mapped(() => finishToolsPhase(runtime, input));
    },

    async suspendTurn(input: StepInput): Promise<void> {
      return mapped(() => suspendTurn(runtime, input));
    },

    async resumeTurn(input: StepInput): Promise<TurnDigest> {
      return mapped(() => resumeTurn(runtime, input));
    },

    async turnStatus(input: { turnId: string }): Promise<{ status: string }> {
      return mapped(() => turnStatus(runtime, input));
    },

    async outputStep(input: StepInput): Promise<OutputStepDigest> {
      return mapped(() => runOutputStep(runtime, input));
    },

    async authorizeCancel(
      input: { turnId: string } & CancelRequest,
    ): Promise<{ allowed: boolean; reason?: string }> {
      return mapped(() => authorizeCancel(runtime, input));
    },

    async rejectCancel(input: { turnId: string; reason: string }): Promise<void> {
      return mapped(() => rejectCancel(runtime, input));
    },

    async cancelTurn(input: {
      turnId: string;
      descendants: CancelDescendants;
    }): Promise<{ status: string; cancelled: string[]; notice: TerminalNotice }> {
      return mapped(() => cancelTurn(runtime, input));
    },

    async failTurn(
      input: StepInput & { error: TurnErrorDigest },
    ): Promise<{ status: string; notice?: TerminalNotice }> {
      return mapped(() => failTurn(runtime, input));
    },
  };
}

export type TurnActivities = ReturnType<typeof createTurnActivities>;
