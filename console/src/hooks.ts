// Small hooks the pages share: load something once (and again on demand), run an action
// (busy while it runs, its error kept), repeat a load on a timer while a condition holds.

import { useCallback, useEffect, useRef, useState } from 'preact/hooks';

export interface Loaded<T> {
  data: T | undefined;
  error: unknown;
  loading: boolean;
  reload(): Promise<void>;
}

/** Runs `load` when `deps` change; `reload` runs it again (errors land in `error`). */
export function useLoad<T>(load: () => Promise<T>, deps: unknown[]): Loaded<T> {
  const [data, setData] = useState<T | undefined>(undefined);
  const [error, setError] = useState<unknown>(undefined);
  const [loading, setLoading] = useState(true);
  const latest = useRef(load);
  latest.current = load;
  const generation = useRef(0);
  const reload = useCallback(async () => {
    const mine = ++generation.current;
    setLoading(true);
    try {
      const value = await latest.current();
      if (mine !== generation.current) return;
      setData(value);
      setError(undefined);
    } catch (e) {
      if (mine === generation.current) setError(e);
    } finally {
      if (mine === generation.current) setLoading(false);
    }
  }, []);
  useEffect(() => {
    void reload();
  }, deps);
  return { data, error, loading, reload };
}

export interface Action {
  /** True while it runs: its button shows busy. */
  busy: boolean;
  /** What the last run threw, until the next run starts. */
  error: unknown;
  run(): Promise<void>;
}

/** An action a button or a form runs (save, delete, sign in): busy while it runs, its error kept. */
export function useAction(act: () => Promise<void>): Action {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(undefined);
  const run = async () => {
    setBusy(true);
    setError(undefined);
    try {
      await act();
    } catch (e) {
      setError(e);
    } finally {
      setBusy(false);
    }
  };
  return { busy, error, run };
}

/** Calls `tick` every `ms` while `active`; stops when the page goes. */
export function useInterval(tick: () => void, ms: number, active: boolean): void {
  const latest = useRef(tick);
  latest.current = tick;
  useEffect(() => {
    if (!active) return;
    const t = setInterval(() => latest.current(), ms);
    return () => clearInterval(t);
  }, [ms, active]);
}

/** Whether the tab is visible: polls pause while it is hidden. */
export function useVisible(): boolean {
  const [visible, setVisible] = useState(document.visibilityState === 'visible');
  useEffect(() => {
    const on = () => setVisible(document.visibilityState === 'visible');
    document.addEventListener('visibilitychange', on);
    return () => document.removeEventListener('visibilitychange', on);
  }, []);
  return visible;
}
