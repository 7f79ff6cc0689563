import type { Logger } from '../lib/log.ts';
import type { LiveRendition } from './llhls/index.ts';
import type { SessionPlugin, SessionPluginFactory, SessionView } from './session-plugins.ts';

// The plug-ins riding along one session on this node (the archive, restreaming): made when the
// session starts or is continued here, told of each rendition once, of the publisher's end,
// and of the session's end. A plug-in that throws is logged and left out: the session, its
// ladder and its viewers go on without it.

export class SessionRiders {
  readonly #plugins: SessionPlugin[] = [];
  readonly #log: Logger;
  readonly #view: SessionView;
  #ended = false;

  constructor(factories: readonly SessionPluginFactory[], view: SessionView) {
    this.#view = view;
    this.#log = view.log;
    for (const make of factories) {
      const plugin = this.#guard('start', () => make(view));
      if (plugin) this.#plugins.push(plugin);
    }
  }

  /** A rendition was made (once per rendition: it outlives ladder restarts and reconnects). */
  rendition(r: LiveRendition): void {
    for (const p of this.#plugins) this.#guard('rendition', () => p.rendition?.(r.name, (t) => void r.tap(t)));
  }

  /** The publisher is gone; the session may go on within the reconnect window. */
  publishEnded(): void {
    for (const p of this.#plugins) this.#guard('publishEnded', () => p.publishEnded?.());
  }

  /** The session is over on this node: each plug-in stops and flushes (once). */
  async end(): Promise<void> {
    if (this.#ended) return;
    this.#ended = true;
    await Promise.all(
      this.#plugins.map((p) =>
        p
          .end()
          .catch((err: unknown) =>
            this.#log.error({ err, sessionId: this.#view.sessionId }, 'a session plug-in failed to end'),
          ),
      ),
    );
  }

  #guard<T>(what: string, call: () => T): T | undefined {
    try {
      return call();
    } catch (err) {
      this.#log.error({ err, sessionId: this.#view.sessionId, step: what }, 'a session plug-in failed');
      return undefined;
    }
  }
}
