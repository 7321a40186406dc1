import { useRef, useState } from 'react';
import type { ConsoleTurnPage, ConsoleTurnSummary } from '../api.js';
import { api } from '../api.js';
import { formatCost, formatMs, formatTime, principalText, TERMINAL } from '../format.js';
import { useResource, useTranscript } from '../hooks.js';
import type { RouteParams } from '../router.js';
import type { Decision } from './approvals.js';
import { ApprovalCard } from './approvals.js';
import { Json, Loading, Status, TurnLink } from './common.js';
import { LiveStream } from './live.js';
import { Markdown } from './markdown.js';
import { Transcript } from './transcript.js';

function Controls({ page, onDone }: { page: ConsoleTurnPage; onDone: () => void }) {
  const [text, setText] = useState('');
  const [message, setMessage] = useState<string | null>(null);
  const send = async (action: string, body: Record<string, unknown> = {}) => {
    try {
      await api.control(page.turn.id, action, body);
      setMessage(`${action}: sent`);
      if (action === 'steer') setText('');
      onDone();
    } catch (error) {
      setMessage(`${action} refused: ${(error as Error).message}`);
    }
  };
  return (
    <section className="card" aria-labelledby="controls-title">
      <h2 id="controls-title">Controls</h2>
      <div className="actions">
        {page.turn.status === 'paused' ? (
          <button type="button" onClick={() => void send('resume')}>
            Resume
          </button>
        ) : (
          <button type="button" onClick={() => void send('pause')}>
            Pause
          </button>
        )}
        <button type="button" className="danger" onClick={() => void send('cancel')}>
          Cancel
        </button>
      </div>
      <form
        className="steer"
        onSubmit={(e) => {
          e.preventDefault();
          if (text.trim()) void send('steer', { text });
        }}
      >
        <label>
          Steer{' '}
          <input
            value={text}
            onChange={(e) => setText(e.target.value)}
            placeholder="a message for the agent"
          />
        </label>
        <button type="submit">Send</button>
      </form>
      {message ? <p role="status">{message}</p> : null}
    </section>
  );
}

function Tree({ tree, current }: { tree: ConsoleTurnSummary[]; current: string }) {
  const children = new Map<string | null, ConsoleTurnSummary[]>();
  const ids = new Set(tree.map((t) => t.id));
  for (const turn of tree) {
    const parent = turn.parentTurnId && ids.has(turn.parentTurnId) ? turn.parentTurnId : null;
    children.set(parent, [...(children.get(parent) ?? []), turn]);
  }
  const branch = (parent: string | null) => {
    const list = children.get(parent);
    if (!list) return null;
    return (
      <ul>
        {list.map((turn) => (
          <li key={turn.id} aria-current={turn.id === current ? 'page' : undefined}>
            <TurnLink id={turn.id}>{turn.agentName}</TurnLink>{' '}
            <Status status={turn.status} waitingFor={turn.waitingFor} />{' '}
            <span className="meta">
              {turn.tokens} tokens · {formatCost(turn.cost)}
            </span>
            {branch(turn.id)}
          </li>
        ))}
      </ul>
    );
  };
  return (
    <section className="card" aria-labelledby="tree-title">
      <h2 id="tree-title">Sub-agent tree</h2>
      <nav className="tree" aria-label="Sub-agent tree">
        {branch(null)}
      </nav>
    </section>
  );
}

function Steps({ page }: { page: ConsoleTurnPage }) {
  return (
    <section className="card" aria-labelledby="steps-title">
      <h2 id="steps-title">Usage and cost per step</h2>
      {page.steps.length === 0 ? (
        <p>No model call yet.</p>
      ) : (
        <div className="table-scroll">
          <table className="list">
            <thead>
              <tr>
                <th>Step</th>
                <th>Model</th>
                <th>Duration</th>
                <th>Tool calls</th>
                <th>Tokens</th>
                <th>Cost</th>
              </tr>
            </thead>
            <tbody>
              {page.steps.map((step) => (
                <tr key={step.index}>
                  <td className="num">{step.index}</td>
                  <td>{step.model ?? '—'}</td>
                  <td className="num">{formatMs(step.durationMs)}</td>
                  <td className="num">{step.toolCalls}</td>
                  <td className="num">{step.tokens ?? '—'}</td>
                  <td className="num">{formatCost(step.cost)}</td>
                </tr>
              ))}
            </tbody>
            <tfoot>
              <tr>
                <th colSpan={4}>Turn total</th>
                <td className="num">{page.turn.tokens}</td>
                <td className="num">{formatCost(page.turn.cost)}</td>
              </tr>
            </tfoot>
          </table>
        </div>
      )}
    </section>
  );
}

function Timeline({ page }: { page: ConsoleTurnPage }) {
  const phases = page.timeline;
  if (phases.length === 0) return null;
  const start = Math.min(...phases.map((p) => Date.parse(p.startedAt)));
  const now = Date.now();
  const end = Math.max(...phases.map((p) => (p.completedAt ? Date.parse(p.completedAt) : now)), start + 1);
  const span = end - start;
  return (
    <section className="card" aria-labelledby="timeline-title">
      <h2 id="timeline-title">Timeline</h2>
      <ol className="timeline">
        {phases.map((phase, i) => {
          const from = Date.parse(phase.startedAt) - start;
          const to = (phase.completedAt ? Date.parse(phase.completedAt) : now) - start;
          return (
            <li key={i}>
              <span className="phase-label">{phase.label}</span>
              <span className="bar-track" aria-hidden="true">
                <span
                  className={`bar bar-${phase.kind}`}
                  style={{
                    left: `${(from / span) * 100}%`,
                    width: `${Math.max(0.5, ((to - from) / span) * 100)}%`,
                  }}
                />
              </span>
              <span className="num">{formatMs(phase.durationMs)}</span>
            </li>
          );
        })}
      </ol>
    </section>
  );
}

export function TurnView({ params }: RouteParams) {
  const id = params['id'] ?? '';
  // The last full page: a poll sends its version and gets `{unchanged}` while nothing happened.
  const last = useRef<ConsoleTurnPage | null>(null);
  const page = useResource(
    `turn:${id}`,
    async () => {
      const known = last.current?.turn.id === id ? last.current : null;
      const answer = await api.turn(id, known?.version);
      if ('unchanged' in answer) return known!;
      last.current = answer;
      return answer;
    },
    (data) => (TERMINAL.includes(data.turn.status) ? null : 1_500),
  );
  const finished = page.data ? TERMINAL.includes(page.data.turn.status) : false;
  const transcript = useTranscript(id, page.data === null ? null : !finished);
  const [decided, setDecided] = useState<Map<string, Decision>>(() => new Map());
  if (!page.data) return <Loading error={page.error} what={`turn ${id}`} />;
  const data = page.data;
  const turn = data.turn;
  const awaiting = data.toolExecutions.filter(
    (e) => e.status === 'awaiting_approval' || decided.has(e.toolCallId),
  );
  return (
    <article aria-labelledby="turn-title" className="turn">
      <header className="turn-head">
        <h1 id="turn-title">
          {turn.agentName} <Status status={turn.status} waitingFor={turn.waitingFor} />
        </h1>
        <p className="meta">
          turn <code>{turn.id}</code> · conversation <code>{turn.conversationId}</code>
          {turn.parentTurnId ? (
            <>
              {' '}
              · parent <TurnLink id={turn.parentTurnId} />
            </>
          ) : null}{' '}
          · principal {principalText(turn.principal)} · created {formatTime(turn.createdAt)}
        </p>
        {turn.task ? <blockquote className="task">{turn.task}</blockquote> : null}
        <p className="links">
          {data.links.temporal ? (
            <a href={data.links.temporal} target="_blank" rel="noreferrer noopener">
              Open the workflow in the Temporal UI
            </a>
          ) : (
            <span className="meta">No Temporal UI configured (--temporal-ui-url)</span>
          )}
        </p>
        <p className="meta">
          {turn.tokens} tokens · {formatCost(turn.cost)}
          {turn.model ? ` · ${turn.model}` : ''}
        </p>
        {data.truncated ? (
          <p className="meta">A long turn: its tree, tools and timeline show their first pages.</p>
        ) : null}
      </header>
      {turn.error ? (
        <section className="card error-box" role="alert" aria-labelledby="error-title">
          <h2 id="error-title">Error: {String(turn.error['class'])}</h2>
          <p className="text">{String(turn.error['message'])}</p>
          <Json value={turn.error} />
        </section>
      ) : null}
      {awaiting.map((execution) => (
        <ApprovalCard
          key={execution.toolCallId}
          approval={{
            turnId: turn.id,
            rootTurnId: turn.rootTurnId,
            agentName: turn.agentName,
            principal: turn.principal,
            toolCallId: execution.toolCallId,
            toolName: execution.toolName,
            arguments: execution.arguments,
            requestedAt: execution.createdAt,
          }}
          {...(decided.has(execution.toolCallId) ? { decided: decided.get(execution.toolCallId)! } : {})}
          onDecided={(decision) => {
            setDecided((before) => new Map(before).set(execution.toolCallId, decision));
            page.reload();
          }}
        />
      ))}
      {!finished ? <Controls page={data} onDone={page.reload} /> : null}
      <div className="columns">
        <div className="main-column">
          <section aria-labelledby="transcript-title">
            <h2 id="transcript-title">Transcript</h2>
            {transcript.error ? (
              <p role="alert" className="error">
                Could not load the transcript: {transcript.error.message}
              </p>
            ) : null}
            <Transcript
              turnId={turn.id}
              messages={transcript.messages}
              toolExecutions={data.toolExecutions}
            />
          </section>
          {turn.outputText !== null && finished ? (
            <section className="card" aria-labelledby="output-title">
              <h2 id="output-title">Output</h2>
              <Markdown text={turn.outputText} />
            </section>
          ) : null}
        </div>
        <div className="side-column">
          <LiveStream turnId={turn.id} />
          <Tree tree={data.tree} current={turn.id} />
          <Steps page={data} />
          <Timeline page={data} />
        </div>
      </div>
    </article>
  );
}
