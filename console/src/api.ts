/** The console's JSON API (src/console/handler.ts), relative to the page: it works at any mount path. */
import type {
  ConsoleApproval,
  ConsoleConversationSummary,
  ConsoleTranscriptPage,
  ConsoleTurnPage,
  ConsoleTurnSummary,
} from '../../src/console/data.js';

export type {
  ConsoleApproval,
  ConsoleConversationSummary,
  ConsoleTranscriptPage,
  ConsoleTurnPage,
  ConsoleTurnSummary,
};

/** A list page: its rows and the cursor of the next page (null at the end). */
type Paged<K extends string, T> = Record<K, T[]> & { nextCursor: string | null };

export interface ConsoleInfo {
  temporalUiUrl: string | null;
  namespace: string;
  authenticated: boolean;
  principal: unknown;
}

class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

async function call<T>(path: string, init?: RequestInit): Promise<T> {
  const response = await fetch(`api/${path}`, init);
  const body = (await response.json().catch(() => ({}))) as { error?: string };
  if (!response.ok) throw new ApiError(response.status, body.error ?? `HTTP ${response.status}`);
  return body as T;
}

export const api = {
  info: () => call<ConsoleInfo>('info'),
  turns: (query: URLSearchParams) => call<Paged<'turns', ConsoleTurnSummary>>(`turns?${query}`),
  conversations: (query: URLSearchParams) =>
    call<Paged<'conversations', ConsoleConversationSummary>>(`conversations?${query}`),
  approvals: () => call<Paged<'approvals', ConsoleApproval>>('approvals'),
  /** The turn's page; with `since` (its version), `{unchanged}` while nothing happened. */
  turn: (id: string, since?: string) =>
    call<ConsoleTurnPage | { unchanged: true; version: string }>(
      `turns/${encodeURIComponent(id)}${since ? `?since=${encodeURIComponent(since)}` : ''}`,
    ),
  /** A page of the turn's transcript after message sequence `after`. */
  messages: (id: string, after: number) =>
    call<ConsoleTranscriptPage>(`turns/${encodeURIComponent(id)}/messages?after=${after}`),
  /** A control: approve, reject, pause, resume, steer, cancel. */
  control: (turnId: string, action: string, body: Record<string, unknown> = {}) =>
    call<unknown>(`turns/${encodeURIComponent(turnId)}/${action}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-turnkit-console': '1' },
      body: JSON.stringify(body),
    }),
  streamUrl: (turnId: string) => `api/turns/${encodeURIComponent(turnId)}/stream`,
};
