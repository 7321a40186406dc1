import { api } from '../api.js';
import { formatCost, formatTime } from '../format.js';
import { useResource } from '../hooks.js';
import type { RouteParams } from '../router.js';
import { href } from '../router.js';
import { Loading, Pager, Status, TurnLink } from './common.js';
import { Filters } from './turns.js';

export function ConversationsView({ query }: RouteParams) {
  const list = useResource(
    `conversations?${query}`,
    () => api.conversations(query),
    () => 5_000,
  );
  return (
    <section aria-labelledby="conversations-title">
      <h1 id="conversations-title">Conversations</h1>
      <p className="meta">Newest first; turns, tokens and cost count every turn of the conversation.</p>
      <Filters path="/conversations" query={query} />
      {!list.data ? (
        <Loading error={list.error} what="conversations" />
      ) : list.data.conversations.length === 0 ? (
        <p>No conversations match.</p>
      ) : (
        <table className="list">
          <thead>
            <tr>
              <th>Conversation</th>
              <th>Agent</th>
              <th>Turns</th>
              <th>Last turn</th>
              <th>Tokens</th>
              <th>Cost</th>
              <th>Active</th>
            </tr>
          </thead>
          <tbody>
            {list.data.conversations.map((c) => (
              <tr key={c.id}>
                <td>
                  <a href={href('/turns', {}, new URLSearchParams({ conversation: c.id }))}>{c.id}</a>
                </td>
                <td>{c.agentName}</td>
                <td className="num">{c.turns}</td>
                <td>
                  <TurnLink id={c.lastTurnId} /> <Status status={c.lastStatus} />
                </td>
                <td className="num">{c.tokens}</td>
                <td className="num">{formatCost(c.cost)}</td>
                <td>{formatTime(c.updatedAt)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {list.data ? <Pager path="/conversations" query={query} nextCursor={list.data.nextCursor} /> : null}
    </section>
  );
}
