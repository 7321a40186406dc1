import type { Agent } from '../../agents/agent.js';
import { hasOutputChecks } from '../../agents/agent.js';
import type { OutputViolation } from '../../agents/output-policy.js';
import { storedErrorClass } from '../../errors.js';
import type { JsonObject } from '../../store/types.js';
import { TERMINAL_TURN_STATUSES } from '../../store/types.js';
import { messageCreated, turnEvent } from '../step/events.js';
import { TurnStep } from '../step/turn-step.js';
import type { TurnTx } from '../step/turn-step.js';
import type { OutputAudit } from './violations.js';
import { schemaViolations } from './violations.js';
import { auditKey, checkTurnOutput, storedAudit } from './audit.js';
import type { Runtime } from '../runtime.js';
import { repeatedNotice, terminalNotice } from '../end/notice.js';
import { announceTerminalWrite, writeCompletionIn, writeTerminalRows } from '../end/terminal-write.js';
import { callbackDestination, callbackVerdict } from '../end/callback.js';
import type { OutputStepDigest, OwnerInput } from '../../contract/digests.js';
import type { FinishRequest } from '../../contract/activities.js';
import { phaseOf } from '../step/turn-state.js';

/**
 * The audit of the turn's candidate: the schema check here, then what the `outputAudit`
 * activity stored for this candidate. A workflow that did not run that activity (a history
 * recorded before it existed) gets the checks run here, as they used to be.
 */
async function auditCandidate(step: TurnStep): Promise<OutputAudit | null> {
  const { agent, state } = step;
  if (!agent.outputSchema && !hasOutputChecks(agent)) return null;
  const violations: OutputViolation[] = schemaViolations(agent, state.output_data ?? null);
  if (hasOutputChecks(agent)) {
    violations.push(
      ...(storedAudit(state, auditKey(state)) ??
        (await checkTurnOutput(step, { signal: new AbortController().signal }))),
    );
  }
  return { clean: violations.length === 0, violations };
}

function revisionPrompt(
  agent: Agent,
  audit: OutputAudit,
  terminalToolName: string | null | undefined,
): string {
  const policies = agent.outputPolicies.flatMap((policy) =>
    policy.content ? [`<skill key="${policy.name}">\n${policy.content}\n</skill>`] : [],
  );
  const lines = audit.violations.map(
    (violation, index) => `${index + 1}. ${violation.rule}: ${violation.message}`,
  );
  return [
    'Your previous output failed the output checks. Revise it without adding new claims.',
    ...(policies.length ? ['', 'Policies:', ...policies] : []),
    '',
    'Violations:',
    ...lines,
    ...(terminalToolName ? ['', `Resubmit the revised output by calling ${terminalToolName}.`] : []),
  ].join('\n');
}

/**
 * The output phase (spec §3.3): audit the candidate; with revisions left, append a revision
 * request and go back to the model; otherwise write the terminal status with the output.
 */
export async function runOutputStep(runtime: Runtime, input: OwnerInput): Promise<OutputStepDigest> {
  return (await outputStep(runtime, input))!;
}

/**
 * Release 0.6 (decision 82): the output step run by the activity that ended the turn's last
 * phase. `checked`: that activity ran the output checks; otherwise it runs only for an agent
 * that has none. Null when the workflow takes the output phase itself: checks to run, the
 * turn not in its output phase, or a pause or steering authorized since the workflow counted
 * `finish.controls` (it waits for the output's boundary).
 */
export async function finishInStep(
  runtime: Runtime,
  input: OwnerInput,
  finish: FinishRequest,
  checked = false,
): Promise<OutputStepDigest | null> {
  return outputStep(runtime, input, { finish, checked });
}

/** The output step inside the block that closes the tools phase into the output (decision 89). */
export interface FinishInBlock {
  /** In the block, after the phase's close: the terminal write, unless a control came meanwhile. */
  write(tx: TurnTx): Promise<boolean>;
  /** After the commit of a block whose `write` made the terminal write: the output step's digest. */
  done(step: TurnStep): Promise<OutputStepDigest>;
}

/**
 * `finishInStep` made in the block that closes the tools phase into the output, when nothing
 * is left to decide outside it: no output checks, no output schema (no audit), and no
 * completion callback (whose policy is the application's code, asked outside any block). Null
 * otherwise: the step's own `finishInStep` follows the close, as before.
 */
export async function finishInBlock(step: TurnStep, finish: FinishRequest): Promise<FinishInBlock | null> {
  const { agent, turn } = step;
  if (agent.outputSchema || hasOutputChecks(agent) || callbackDestination(turn) !== null) return null;
  // No destination: the verdict asks no policy.
  const verdict = await callbackVerdict(step.runtime, turn);
  return {
    async write(tx) {
      // A pause or steering authorized while the finishing step ran: the workflow's boundary.
      if ((tx.state.boundary_controls ?? 0) !== finish.controls) return false;
      const { state } = tx;
      const attrs = {
        status: 'completed',
        outputText: state.candidate ?? '',
        outputData: state.output_data ?? null,
        error: null,
      } as const;
      await writeCompletionIn(tx, attrs, verdict);
      tx.emit((done) => turnEvent('turn.completed', { status: done.status, output_text: done.outputText }));
      return true;
    },
    async done(step) {
      const turn = step.turn;
      return { done: true, status: turn.status, notice: await terminalNotice(step.store, turn, null) };
    },
  };
}

async function outputStep(
  runtime: Runtime,
  input: OwnerInput,
  inStep?: { finish: FinishRequest; checked: boolean },
): Promise<OutputStepDigest | null> {
  const step = await TurnStep.open(runtime, input);
  // Run again after the terminal write committed (the worker died in a listener, BG-14).
  if (TERMINAL_TURN_STATUSES.includes(step.turn.status)) {
    const repeated = await repeatedNotice(runtime, input.turnId);
    if (repeated) return { done: true, status: step.turn.status, notice: repeated };
  }
  const { agent, state } = step;
  if (inStep && (phaseOf(step.turn) !== 'output' || (!inStep.checked && hasOutputChecks(agent)))) return null;
  const audit = await auditCandidate(step);
  const revisionsUsed = state.revisions_used ?? 0;
  if (audit && !audit.clean && revisionsUsed < agent.outputRetries) {
    await requestRevision(step, audit, revisionsUsed + 1);
    return { done: false, status: step.turn.status };
  }
  return writeOutput(step, audit, inStep?.finish);
}

/** Appends the revision request and sends the turn back to the model. */
async function requestRevision(step: TurnStep, audit: OutputAudit, attempt: number): Promise<void> {
  await step.write(async (tx) => {
    const message = await tx.store.appendMessage({
      conversationId: tx.turn.conversationId,
      turnId: tx.turn.id,
      role: 'user',
      kind: 'text',
      content: revisionPrompt(step.agent, audit, tx.state.terminal_tool_name),
      metadata: { source: 'output_policy', attempt },
    });
    tx.patchState({ phase: 'model', parts: null, revisions_used: attempt });
    tx.emit(
      messageCreated(message),
      turnEvent('output_policy.revision', { violation_count: audit.violations.length, attempt }),
    );
  });
}

/** The terminal write with the candidate as the output: completed, or failed by its audit. */
async function writeOutput(
  step: TurnStep,
  audit: OutputAudit | null,
  finish?: FinishRequest,
): Promise<OutputStepDigest | null> {
  const { runtime, agent, state } = step;
  const failed = audit !== null && !audit.clean && agent.outputPolicyMode === 'fail';
  const auditJson = audit as unknown as JsonObject | null;
  const error = failed
    ? {
        class: storedErrorClass('OutputAudit'),
        message: audit.violations.map((v) => v.message).join('; '),
        policy_audit: auditJson,
      }
    : null;
  const verdict = await callbackVerdict(runtime, step.turn);
  const status = failed ? 'failed' : 'completed';
  const attrs = {
    status,
    outputText: state.candidate ?? '',
    outputData: state.output_data ?? null,
    error,
  } as const;
  const write = await step.write(async (tx) => {
    // A pause or steering authorized while the finishing step ran: the workflow's boundary.
    if (finish && (tx.state.boundary_controls ?? 0) !== finish.controls) return null;
    if (auditJson) tx.patchState({ policy_audit: auditJson });
    const write = await writeTerminalRows(
      tx.store,
      tx.turn.id,
      attrs,
      'turn failed its output checks',
      verdict,
    );
    // Its repaired transcript and callback are appended in this transaction, heard after it.
    await announceTerminalWrite(runtime, write);
    if (audit)
      tx.emit(
        turnEvent('output_policy.completed', {
          clean: audit.clean,
          violation_count: audit.violations.length,
        }),
      );
    tx.emit(
      failed
        ? turnEvent('turn.failed', { error: error as JsonObject })
        : turnEvent('turn.completed', { status: write.turn.status, output_text: write.turn.outputText }),
    );
    return write;
  });
  if (!write) return null;
  const done = step.turn;
  return {
    done: true,
    status: done.status,
    notice: await terminalNotice(runtime.store, done, write.callback.delivery),
  };
}
