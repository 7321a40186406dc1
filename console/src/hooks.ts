import { useCallback, useEffect, useRef, useState } from 'react';
import type { ConsoleTranscriptPage } from './api.js';
import { api } from './api.js';

export interface Resource<T> {
  data: T | null;
  error: Error | null;
  loading: boolean;
  reload: () => void;
}

/** Loads `load()` when `key` changes, and again every `pollMs` while `poll` is true. */
export function useResource<T>(
  key: string,
  load: () => Promise<T>,
  poll?: (data: T) => number | null,
): Resource<T> {
  const [state, setState] = useState<{ key: string; data: T | null; error: Error | null }>({
    key,
    data: null,
    error: null,
  });
  const [tick, setTick] = useState(0);
  const loader = useRef(load);
  loader.current = load;
  const poller = useRef(poll);
  poller.current = poll;
  useEffect(() => {
    let live = true;
    let timer: ReturnType<typeof setTimeout> | undefined;
    loader
      .current()
      .then((data) => {
        if (!live) return;
        setState({ key, data, error: null });
        const every = poller.current?.(data) ?? null;
        if (every !== null) timer = setTimeout(() => setTick((n) => n + 1), every);
      })
      .catch((error: unknown) => {
        if (live) setState((s) => ({ key, data: s.key === key ? s.data : null, error: error as Error }));
      });
    return () => {
      live = false;
      if (timer) clearTimeout(timer);
    };
  }, [key, tick]);
  const reload = useCallback(() => setTick((n) => n + 1), []);
  const fresh = state.key === key;
  return {
    data: fresh ? state.data : null,
    error: fresh ? state.error : null,
    loading: !fresh || (state.data === null && state.error === null),
    reload,
  };
}

type Message = ConsoleTranscriptPage['messages'][number];

/**
 * A turn's transcript, read page by page once, then only the messages after the last one: every
 * `pollMs` while `live`, and once more when it stops being live (the turn's last words). `live`
 * null: the turn is not known yet, nothing is read.
 */
export function useTranscript(
  turnId: string,
  live: boolean | null,
  pollMs = 1_500,
): { messages: Message[]; error: Error | null } {
  const [state, setState] = useState<{ turnId: string; messages: Message[]; error: Error | null }>({
    turnId,
    messages: [],
    error: null,
  });
  // What was read of which turn: kept across `live` changes, so no page is read twice.
  const read = useRef<{ turnId: string; after: number; messages: Message[] }>({
    turnId,
    after: 0,
    messages: [],
  });
  useEffect(() => {
    if (live === null) return;
    if (read.current.turnId !== turnId) read.current = { turnId, after: 0, messages: [] };
    const known = read.current;
    let stopped = false;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const next = async () => {
      try {
        for (;;) {
          const page = await api.messages(turnId, known.after);
          if (stopped) return;
          if (page.messages.length > 0) {
            known.messages = [...known.messages, ...page.messages];
            known.after = page.messages.at(-1)!.sequence;
          }
          if (page.nextAfter === null) break;
        }
        setState({ turnId, messages: known.messages, error: null });
      } catch (error) {
        if (!stopped) setState({ turnId, messages: known.messages, error: error as Error });
      }
      if (!stopped && live) timer = setTimeout(() => void next(), pollMs);
    };
    void next();
    return () => {
      stopped = true;
      if (timer) clearTimeout(timer);
    };
  }, [turnId, pollMs, live]);
  const fresh = state.turnId === turnId;
  return { messages: fresh ? state.messages : [], error: fresh ? state.error : null };
}
