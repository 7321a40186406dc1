import type { ReactNode } from 'react';
import { href } from '../router.js';
import { shortId, statusText } from '../format.js';

export function Status({ status, waitingFor }: { status: string; waitingFor?: string | null }) {
  return <span className={`status status-${status}`}>{statusText(status, waitingFor)}</span>;
}

/** Next and first page links of a list, keeping its filters in the hash's query. */
export function Pager({
  path,
  query,
  nextCursor,
}: {
  path: string;
  query: URLSearchParams;
  nextCursor: string | null;
}) {
  const first = new URLSearchParams(query);
  first.delete('cursor');
  const next = new URLSearchParams(query);
  if (nextCursor) next.set('cursor', nextCursor);
  if (!nextCursor && !query.has('cursor')) return null;
  return (
    <nav className="pager" aria-label="Pages">
      {query.has('cursor') ? <a href={href(path, {}, first)}>First page</a> : null}
      {nextCursor ? <a href={href(path, {}, next)}>Next page</a> : null}
    </nav>
  );
}

export function TurnLink({ id, children }: { id: string; children?: ReactNode }) {
  return (
    <a href={href('/turns/:id', { id })} title={id}>
      {children ?? shortId(id)}
    </a>
  );
}

export function Loading({ error, what }: { error: Error | null; what: string }) {
  if (error)
    return (
      <p role="alert" className="error">
        Could not load {what}: {error.message}
      </p>
    );
  return <p aria-live="polite">Loading {what}…</p>;
}

export function Json({ value }: { value: unknown }) {
  return <pre className="json">{JSON.stringify(value, null, 2)}</pre>;
}
