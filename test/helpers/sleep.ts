// A stand-in job's wait: it ends early, rejecting with the signal's reason, when the worker
// aborts the job (cancel, lease lost, shutdown), as a real job's ffmpeg would be stopped.

/** Resolves after `ms`, or rejects with `signal.reason` as soon as `signal` aborts. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const t = setTimeout(resolve, ms);
    signal?.addEventListener(
      'abort',
      () => {
        clearTimeout(t);
        reject(signal.reason);
      },
      { once: true },
    );
  });
}
