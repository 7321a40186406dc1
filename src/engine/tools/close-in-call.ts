/**
 * Decision 89: the block that records the result of the call that closes the tools phase
 * (`close`: a completed terminal tool, or the response's last call) closes the phase too, and,
 * given `finish`, makes the output step's terminal write when nothing is left to decide
 * outside it: one transaction where there were three. What the close needs is read before the
 * block (unlocked, as the close after the result read it); the block writes only if its
 * compare-and-set of the call's row succeeds.
 */
import type { JsonObject, ToolExecutionRecord } from '../../store/types.js';
import type { ToolCallInput } from '../../contract/activities.js';
import type { TurnDigest } from '../../contract/digests.js';
import { finishInBlock } from '../output/output-step.js';
import { turnDigest } from '../step/digest.js';
import type { TurnTx } from '../step/turn-step.js';
import type { ToolExecution } from './tool-execution.js';
import { preparePhaseClose, writePhaseClose } from './tools-phase.js';
import type { Closing } from './verdict.js';

/** In the closing block, after the call's result: the phase's close; then its digest, after the commit. */
type CloseInBlock = (tx: TurnTx) => Promise<() => Promise<TurnDigest>>;

/**
 * Prepares, for a call that is about to close as `closing`, the phase's close in the same
 * block; undefined when this call does not close the phase, or when an earlier call is still
 * open (the close after the result raises StaleTask then, as it did).
 */
export type PhaseCloser = (
  execution: ToolExecutionRecord,
  closing: Closing,
) => Promise<CloseInBlock | undefined>;

export function phaseCloser(run: ToolExecution, input: ToolCallInput): PhaseCloser | undefined {
  const { close, finish } = input;
  if (!close) return undefined;
  return async (execution, closing) => {
    const terminal = closing.status === 'completed' && (run.tool?.terminal ?? false);
    if (closing.raise || (!terminal && !close.last)) return undefined;
    // The call's row as the block will leave it, if its compare-and-set succeeds.
    const settled: ToolExecutionRecord = {
      ...execution,
      status: closing.status,
      ...(closing.status === 'completed' ? { result: closing.payload } : {}),
    };
    const plan = await preparePhaseClose(run.step, terminal ? run.call.id : null, [settled]);
    if (!plan || plan.open.length > 0) return undefined;
    const output = plan.terminal && finish ? await finishInBlock(run.step, finish) : null;
    return async (tx) => {
      await writePhaseClose(tx, plan);
      // Where the phase's close leaves the turn, before the output step's terminal write.
      const closed = turnDigest(run.agent, {
        ...tx.turn,
        options: { ...tx.turn.options, state: tx.state as JsonObject },
      });
      const finished = output ? await output.write(tx) : false;
      return async () => (finished ? { ...closed, done: await output!.done(run.step) } : closed);
    };
  };
}
