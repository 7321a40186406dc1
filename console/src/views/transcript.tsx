/**
 * A turn's transcript: every message with its parts (text, thinking, tool calls with their
 * arguments and results, media, compaction summaries). Virtualized: only the rows in view
 * are in the DOM, so 1,000 messages stay fast. Keyboard: the list scrolls with the arrow keys,
 * Page Up/Down, Home and End once focused.
 */
import { useVirtualizer } from '@tanstack/react-virtual';
import { useRef } from 'react';
import type { ConsoleTranscriptPage, ConsoleTurnPage } from '../api.js';
import { formatTime } from '../format.js';
import { Json } from './common.js';

type Message = ConsoleTranscriptPage['messages'][number];
type Part = Message['content'][number];
type Execution = ConsoleTurnPage['toolExecutions'][number];

const MAX_TEXT = 4_000;

function Clipped({ text }: { text: string }) {
  if (text.length <= MAX_TEXT) return <p className="text">{text}</p>;
  return (
    <details>
      <summary>
        <span className="text">{text.slice(0, 400)}…</span> ({text.length} characters: show all)
      </summary>
      <p className="text">{text}</p>
    </details>
  );
}

function PartView({ part, executions }: { part: Part; executions: Map<string, Execution> }) {
  switch (part.type) {
    case 'text':
      return <Clipped text={part.text} />;
    case 'thinking':
      return (
        <details className="thinking">
          <summary>thinking{part.redacted ? ' (redacted)' : ''}</summary>
          <p className="text">{part.text}</p>
        </details>
      );
    case 'tool_call': {
      const execution = executions.get(part.id);
      return (
        <div className="tool-call">
          <div className="tool-head">
            tool call <code>{part.name}</code>
            {execution ? (
              <span className={`status status-${execution.status}`}>{execution.status}</span>
            ) : null}
          </div>
          <Json value={part.arguments} />
          {part.arguments_error ? <p className="error">bad arguments: {part.arguments_error}</p> : null}
          {execution && execution.error ? <p className="error">error: {execution.error.message}</p> : null}
        </div>
      );
    }
    case 'tool_result':
      return (
        <div className={`tool-result${part.error ? ' failed' : ''}`}>
          <div className="tool-head">
            result of <code>{executions.get(part.tool_call_id)?.toolName ?? part.tool_call_id}</code>
            {part.error ? ' (error)' : ''}
          </div>
          <Clipped text={part.text} />
        </div>
      );
    case 'image':
      return (
        <figure className="media">
          {part.data ? (
            <img alt={part.revised_prompt ?? 'image'} src={`data:${part.mime_type};base64,${part.data}`} />
          ) : (
            <span>
              image <code>{part.url}</code> (not loaded: remote)
            </span>
          )}
          {part.revised_prompt ? <figcaption>{part.revised_prompt}</figcaption> : null}
        </figure>
      );
    case 'file':
      return (
        <p className="media">
          file {part.filename ?? ''} <code>{part.mime_type}</code> {part.url ? <code>{part.url}</code> : null}
        </p>
      );
    case 'media_analysis':
      return (
        <div className="media">
          <div className="tool-head">media analysis{part.model ? ` (${part.model})` : ''}</div>
          <Clipped text={part.text} />
        </div>
      );
    case 'provider':
      return <p className="meta">provider part: {part.kind}</p>;
  }
}

function MessageView({
  message,
  executions,
  own,
}: {
  message: Message;
  executions: Map<string, Execution>;
  own: boolean;
}) {
  const summary = message.kind === 'context_summary';
  return (
    <article
      className={`message role-${message.role}${summary ? ' summary' : ''}${own ? '' : ' context'}`}
      aria-label={`${summary ? 'compaction summary' : message.role} message ${message.sequence}`}
    >
      <div className="message-head">
        <span className="role">{summary ? 'compaction summary' : message.role}</span>
        <span className="meta">
          #{message.sequence} · {message.kind} · {formatTime(message.createdAt)}
          {own ? '' : ' · context'}
        </span>
      </div>
      {message.content.map((part, i) => (
        <PartView key={i} part={part} executions={executions} />
      ))}
    </article>
  );
}

export function Transcript({
  turnId,
  messages,
  toolExecutions,
}: {
  turnId: string;
  messages: readonly Message[];
  toolExecutions: readonly Execution[];
}) {
  const scroller = useRef<HTMLDivElement>(null);
  const executions = new Map(toolExecutions.map((e) => [e.toolCallId, e]));
  const virtualizer = useVirtualizer({
    count: messages.length,
    getScrollElement: () => scroller.current,
    estimateSize: () => 96,
    overscan: 6,
    getItemKey: (index) => messages[index]!.id,
  });
  return (
    <div
      ref={scroller}
      className="transcript"
      tabIndex={0}
      role="feed"
      aria-label={`Transcript, ${messages.length} messages`}
      aria-busy={false}
      // As tall as its messages, up to 70% of the window; then it scrolls.
      style={{ height: `min(70vh, ${virtualizer.getTotalSize() + 2}px)` }}
    >
      <div style={{ height: virtualizer.getTotalSize(), position: 'relative' }}>
        {virtualizer.getVirtualItems().map((item) => {
          const message = messages[item.index]!;
          return (
            <div
              key={item.key}
              data-index={item.index}
              ref={virtualizer.measureElement}
              className="row"
              style={{
                position: 'absolute',
                top: 0,
                left: 0,
                right: 0,
                transform: `translateY(${item.start}px)`,
              }}
            >
              <MessageView message={message} executions={executions} own={message.turnId === turnId} />
            </div>
          );
        })}
      </div>
    </div>
  );
}
