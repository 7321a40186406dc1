/**
 * The live stream of a turn through the AI SDK's `useChat`, resumed from the console's stream
 * endpoint (`api/turns/<id>/stream`, the run's UI message stream): the text as it is written,
 * the tools, the sub-agents, and, from the message metadata, the status, usage, cost and error.
 */
import { useChat } from '@ai-sdk/react';
import { DefaultChatTransport } from 'ai';
import { useMemo } from 'react';
import type { TurnKitUIMessage } from '../../../src/ui/types.js';
import {
  isRunCancelled,
  isRunFailed,
  isToolPart,
  runCostOf,
  runErrorOf,
  runStatusOf,
  runUsageOf,
  subAgentsOf,
  toolNameOf,
} from '../../../src/ui/parts.js';
import { formatCost, toolStateText } from '../format.js';

/** The message's text, one paragraph per model step (a step's text never runs into the next). */
function stepTexts(message: TurnKitUIMessage): string[] {
  const steps: string[] = [''];
  for (const part of message.parts) {
    if (part.type === 'step-start' && steps.at(-1) !== '') steps.push('');
    else if (part.type === 'text') steps[steps.length - 1] += part.text;
  }
  return steps.filter((text) => text !== '');
}

export function LiveStream({ turnId }: { turnId: string }) {
  const transport = useMemo(() => new DefaultChatTransport<TurnKitUIMessage>({ api: 'api/turns' }), []);
  const { messages, status, error } = useChat<TurnKitUIMessage>({ id: turnId, transport, resume: true });
  const message = messages.findLast((m) => m.role === 'assistant');
  const runStatus = message ? runStatusOf(message) : undefined;
  const usage = message ? runUsageOf(message) : undefined;
  const cost = message ? runCostOf(message) : undefined;
  return (
    <section className="card live" aria-labelledby="live-title" data-chat-status={status}>
      <h2 id="live-title">Live stream</h2>
      <p className="meta" aria-live="polite">
        useChat: {status}
        {runStatus ? (
          <>
            {' '}
            · run{' '}
            <span className={`status status-${runStatus}`} data-testid="live-status">
              {runStatus}
            </span>
          </>
        ) : null}
        {usage ? (
          <>
            {' '}
            · <span data-testid="live-usage">{usage.total_tokens} tokens</span>
          </>
        ) : null}
        {cost !== undefined ? (
          <>
            {' '}
            · <span data-testid="live-cost">{formatCost(cost)}</span>
          </>
        ) : null}
      </p>
      {message && isRunCancelled(message) ? (
        <p className="notice" data-testid="live-cancelled">
          The run was cancelled.
        </p>
      ) : null}
      {message && isRunFailed(message) ? (
        <p className="error" role="alert" data-testid="live-failed">
          The run failed: {runErrorOf(message) ?? 'error'}
        </p>
      ) : null}
      {message ? (
        <div className="live-body">
          <div data-testid="live-text">
            {stepTexts(message).map((text, i) => (
              <p key={i} className="text">
                {text}
              </p>
            ))}
          </div>
          {message.parts.filter(isToolPart).map((part) => (
            <p key={part.toolCallId} className="meta">
              tool <code>{toolNameOf(part)}</code>: {toolStateText(part.state)}
            </p>
          ))}
          {subAgentsOf(message).map((sub) => (
            <p key={sub.turnId} className="meta">
              sub-agent <code>{sub.agentName}</code>: {sub.status}
            </p>
          ))}
        </div>
      ) : (
        <p className="meta">Waiting for the stream…</p>
      )}
      {/* A failed run's stream ends with its error too: it is said once, above. */}
      {error && !(message && isRunFailed(message)) ? (
        <p className="error">stream error: {error.message}</p>
      ) : null}
    </section>
  );
}
