import type { FormEvent } from 'react';
import { api } from '../api.js';
import { formatCost, formatTime, principalText, shortId } from '../format.js';
import { useResource } from '../hooks.js';
import type { RouteParams } from '../router.js';
import { href, navigate } from '../router.js';
import { Loading, Pager, Status, TurnLink } from './common.js';

const STATUSES = ['', 'pending', 'waiting', 'running', 'paused', 'completed', 'failed', 'cancelled', 'stale'];
const FIELDS = ['agent', 'status', 'principal', 'conversation', 'since', 'until'] as const;

/** The filter form, shared by the turn and conversation lists: it writes the hash's query. */
export function Filters({ path, query }: { path: string; query: URLSearchParams }) {
  const submit = (event: FormEvent<HTMLFormElement>) => {
    event.preventDefault();
    const data = new FormData(event.currentTarget);
    const next = new URLSearchParams();
    for (const field of FIELDS) {
      const value = String(data.get(field) ?? '').trim();
      if (!value) continue;
      next.set(field, field === 'since' || field === 'until' ? new Date(value).toISOString() : value);
    }
    if (data.get('roots')) next.set('roots', 'true');
    navigate(href(path, {}, next));
  };
  const local = (iso: string | null) => (iso ? new Date(iso).toISOString().slice(0, 16) : '');
  return (
    <form className="filters" onSubmit={submit} aria-label="Filter" key={query.toString()}>
      <label>
        Agent <input name="agent" defaultValue={query.get('agent') ?? ''} />
      </label>
      <label>
        Status{' '}
        <select name="status" defaultValue={query.get('status') ?? ''}>
          {STATUSES.map((s) => (
            <option key={s} value={s}>
              {s || 'any'}
            </option>
          ))}
        </select>
      </label>
      <label>
        Principal <input name="principal" defaultValue={query.get('principal') ?? ''} />
      </label>
      <label>
        Conversation <input name="conversation" defaultValue={query.get('conversation') ?? ''} />
      </label>
      <label>
        Since <input type="datetime-local" name="since" defaultValue={local(query.get('since'))} />
      </label>
      <label>
        Until <input type="datetime-local" name="until" defaultValue={local(query.get('until'))} />
      </label>
      <label className="check">
        <input type="checkbox" name="roots" defaultChecked={query.get('roots') === 'true'} /> roots only
      </label>
      <button type="submit">Filter</button>
    </form>
  );
}

export function TurnsView({ query }: RouteParams) {
  const turns = useResource(
    `turns?${query}`,
    () => api.turns(query),
    () => 5_000,
  );
  return (
    <section aria-labelledby="turns-title">
      <h1 id="turns-title">Turns</h1>
      <Filters path="/turns" query={query} />
      {!turns.data ? (
        <Loading error={turns.error} what="turns" />
      ) : turns.data.turns.length === 0 ? (
        <p>No turns match.</p>
      ) : (
        <table className="list">
          <thead>
            <tr>
              <th>Turn</th>
              <th>Agent</th>
              <th>Status</th>
              <th>Principal</th>
              <th>Conversation</th>
              <th>Tokens</th>
              <th>Cost</th>
              <th>Created</th>
            </tr>
          </thead>
          <tbody>
            {turns.data.turns.map((turn) => (
              <tr key={turn.id}>
                <td>
                  {turn.parentTurnId ? (
                    <span className="sub" aria-label="sub-agent">
                      ↳{' '}
                    </span>
                  ) : null}
                  <TurnLink id={turn.id} />
                </td>
                <td>{turn.agentName}</td>
                <td>
                  <Status status={turn.status} waitingFor={turn.waitingFor} />
                </td>
                <td>{principalText(turn.principal)}</td>
                <td>
                  <a href={href('/turns', {}, new URLSearchParams({ conversation: turn.conversationId }))}>
                    {shortId(turn.conversationId)}
                  </a>
                </td>
                <td className="num">{turn.tokens}</td>
                <td className="num">{formatCost(turn.cost)}</td>
                <td>{formatTime(turn.createdAt)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {turns.data ? <Pager path="/turns" query={query} nextCursor={turns.data.nextCursor} /> : null}
    </section>
  );
}
