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
 * A turn's transcript, read page by page once; while `live`, only the messages after the last
 * one are asked for again, every `pollMs` (never the whole transcript again).
 */
export function useTranscript(
  turnId: string,
  live: boolean,
  pollMs = 1_500,
): { messages: Message[]; error: Error | null; complete: boolean } {
  const [state, setState] = useState<{
    turnId: string;
    messages: Message[];
    error: Error | null;
    complete: boolean;
  }>({ turnId, messages: [], error: null, complete: false });
  // When the turn finishes (`live` turns false) it is read once more, whole, for its last words.
  useEffect(() => {
    let stopped = false;
    let timer: ReturnType<typeof setTimeout> | undefined;
    let after = 0;
    let messages: Message[] = [];
    const read = async () => {
      try {
        for (;;) {
          const page = await api.messages(turnId, after);
          if (stopped) return;
          if (page.messages.length > 0) {
            messages = [...messages, ...page.messages];
            after = page.messages.at(-1)!.sequence;
          }
          if (page.nextAfter === null) break;
        }
        setState({ turnId, messages, error: null, complete: true });
      } catch (error) {
        if (!stopped) setState({ turnId, messages, error: error as Error, complete: false });
      }
      if (!stopped && live) timer = setTimeout(() => void read(), pollMs);
    };
    void read();
    return () => {
      stopped = true;
      if (timer) clearTimeout(timer);
    };
  }, [turnId, pollMs, live]);
  const fresh = state.turnId === turnId;
  return {
    messages: fresh ? state.messages : [],
    error: fresh ? state.error : null,
    complete: fresh && state.complete,
  };
}
