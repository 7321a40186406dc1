import type { Agent } from '../../agents/agent.js';
import { hasOutputChecks } from '../../agents/agent.js';
import type { OutputViolation } from '../../agents/output-policy.js';
import { storedErrorClass } from '../../errors.js';
import type { JsonObject, TurnRecord } from '../../store/types.js';
import type { OutputAudit } from './output-checks.js';
import { auditKey, checkTurnOutput, schemaViolations, storedAudit } from './output-checks.js';
import type { Runtime } from '../runtime.js';
import { repeatedNotice, terminalNotice } from '../end/notice.js';
import { writeTerminal } from '../end/terminal-write.js';
import { callbackVerdict } from '../end/callback.js';
import type { TurnState } from '../step/turn-state.js';
import { turnState, updateState } from '../step/turn-state.js';
import type { OutputStepDigest, OwnerInput } from '../../contract/digests.js';

export type { OutputAudit } from './output-checks.js';

/**
 * The audit of the turn's candidate: the schema check here, then what the `outputAudit`
 * activity stored for this candidate. A workflow that did not run that activity (a history
 * recorded before it existed) gets the checks run here, as they used to be.
 */
async function auditCandidate(
  runtime: Runtime,
  store: Parameters<typeof checkTurnOutput>[1],
  agent: Agent,
  turn: TurnRecord,
  state: TurnState,
): Promise<OutputAudit | null> {
  if (!agent.outputSchema && !hasOutputChecks(agent)) return null;
  const violations: OutputViolation[] = schemaViolations(agent, state.output_data ?? null);
  if (hasOutputChecks(agent)) {
    violations.push(
      ...(storedAudit(state, auditKey(state)) ??
        (await checkTurnOutput(runtime, store, agent, turn, { signal: new AbortController().signal }))),
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
  // Run again after the terminal write committed (the worker died in a listener, BG-14).
  const repeated = await repeatedNotice(runtime, input.turnId);
  if (repeated) {
    return { done: true, status: (await runtime.store.loadTurn(input.turnId)).status, notice: repeated };
  }
  const { store, turn, agent } = await runtime.ownTurn(input);
  const state = turnState(turn);
  const candidate = state.candidate ?? '';
  const outputData = state.output_data ?? null;
  const audit = await auditCandidate(runtime, store, agent, turn, state);
  const revisionsUsed = state.revisions_used ?? 0;

  if (audit && !audit.clean && revisionsUsed < agent.outputRetries) {
    const attempt = revisionsUsed + 1;
    const { message, updated } = await store.atomic(null, async () => {
      const message = await store.appendMessage({
        conversationId: turn.conversationId,
        turnId: turn.id,
        role: 'user',
        kind: 'text',
        content: revisionPrompt(agent, audit, state.terminal_tool_name),
        metadata: { source: 'output_policy', attempt },
      });
      const updated = await updateState(store, turn.id, {
        phase: 'model',
        parts: null,
        revisions_used: attempt,
      });
      return { message, updated };
    });
    await runtime.emit(updated, 'message.created', { message_id: message.id, role: 'user', kind: 'text' });
    await runtime.emit(updated, 'output_policy.revision', {
      violation_count: audit.violations.length,
      attempt,
    });
    return { done: false, status: updated.status };
  }

  const failed = audit !== null && !audit.clean && agent.outputPolicyMode === 'fail';
  const auditJson = audit as unknown as JsonObject | null;
  const error = failed
    ? {
        class: storedErrorClass('OutputAudit'),
        message: audit.violations.map((v) => v.message).join('; '),
        policy_audit: auditJson,
      }
    : null;
  const verdict = await callbackVerdict(runtime, turn);
  const { turn: done, callback } = await store.atomic(null, async () => {
    if (auditJson) await updateState(store, turn.id, { policy_audit: auditJson });
    return writeTerminal(
      runtime,
      store,
      turn.id,
      { status: failed ? 'failed' : 'completed', outputText: candidate, outputData, error },
      'turn failed its output checks',
      verdict,
    );
  });
  await runtime.emitAll(done, [
    ...(audit
      ? [
          ['output_policy.completed', { clean: audit.clean, violation_count: audit.violations.length }] as [
            string,
            JsonObject,
          ],
        ]
      : []),
    failed
      ? ['turn.failed', { error: error as JsonObject }]
      : ['turn.completed', { status: done.status, output_text: done.outputText }],
  ]);
  return { done: true, status: done.status, notice: await terminalNotice(runtime.store, done, callback) };
}
