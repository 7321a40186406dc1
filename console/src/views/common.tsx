import type { ReactNode } from 'react';
import { href } from '../router.js';
import { shortId } from '../format.js';

export function Status({ status }: { status: string }) {
  return <span className={`status status-${status}`}>{status}</span>;
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
