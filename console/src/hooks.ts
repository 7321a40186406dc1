import { useCallback, useEffect, useRef, useState } from 'react';

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
