import type { Agent, OutputViolation } from '../agents/agent.js';
import { ArgumentError, storedErrorClass } from '../errors.js';
import type { Json, JsonObject, TurnRecord } from '../store/types.js';
import type { OutputStepDigest, OwnerInput } from './digest.js';
import type { Runtime } from './runtime.js';
import { repeatedNotice, terminalNotice, writeTerminal } from './terminal.js';
import { turnState, updateState } from './turn-state.js';

export interface OutputAudit {
  clean: boolean;
  violations: OutputViolation[];
}

function toViolations(value: unknown): OutputViolation[] {
  if (value === undefined || value === null || value === true || value === false) return [];
  if (typeof value === 'string') return [{ rule: 'output_constraint', message: value }];
  if (Array.isArray(value)) return value.flatMap(toViolations);
  if (typeof value === 'object') {
    const { rule, message, error, metadata, ...rest } = value as Record<string, unknown>;
    const violation: OutputViolation = {
      rule: typeof rule === 'string' ? rule : 'output_constraint',
      message:
        typeof message === 'string'
          ? message
          : typeof error === 'string'
            ? error
            : 'output constraint failed',
    };
    const meta =
      (metadata as JsonObject | undefined) ?? (Object.keys(rest).length ? (rest as JsonObject) : undefined);
    if (meta) violation.metadata = meta;
    return [violation];
  }
  throw new ArgumentError(
    `an output constraint returned ${typeof value}; return nothing, a string, or a violation`,
  );
}

/** Runs the agent's output constraints on the structured output, or else the text. */
export async function auditOutput(
  agent: Agent,
  turn: TurnRecord,
  outputText: string | null,
  outputData: Json,
): Promise<OutputAudit | null> {
  if (agent.outputConstraints.length === 0) return null;
  const output = outputData !== null && outputData !== undefined ? outputData : outputText;
  const violations: OutputViolation[] = [];
  for (const constraint of agent.outputConstraints) {
    violations.push(...toViolations(await constraint(output, { turn, outputText, outputData })));
  }
  return { clean: violations.length === 0, violations };
}

function revisionPrompt(audit: OutputAudit, terminalToolName: string | null | undefined): string {
  const lines = audit.violations.map(
    (violation, index) => `${index + 1}. ${violation.rule}: ${violation.message}`,
  );
  return [
    'Your previous output failed the output checks. Revise it without adding new claims.',
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
  const audit = await auditOutput(agent, turn, candidate, outputData);
  const revisionsUsed = state.revisions_used ?? 0;

  if (audit && !audit.clean && revisionsUsed < agent.outputRetries) {
    const attempt = revisionsUsed + 1;
    const { message, updated } = await store.atomic(null, async () => {
      const message = await store.appendMessage({
        conversationId: turn.conversationId,
        turnId: turn.id,
        role: 'user',
        kind: 'text',
        content: revisionPrompt(audit, state.terminal_tool_name),
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
  const { turn: done, callback } = await store.atomic(null, async () => {
    if (auditJson) await updateState(store, turn.id, { policy_audit: auditJson });
    return writeTerminal(
      runtime,
      store,
      turn.id,
      { status: failed ? 'failed' : 'completed', outputText: candidate, outputData, error },
      'turn failed its output checks',
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
