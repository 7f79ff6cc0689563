// The orchestrators a gateway knows: configured URLs and self-registered ones, their polled
// capabilities, and what the gateway measured itself (latency per token, failures). Choosing
// follows API.md section B: serves the model, warm first, price under the ceiling, free
// capacity, lowest measured latency per token. (A pool, not a "Registry": that is prom-client's
// metrics registry, imported next to it; issue #16.) Each candidate carries the features its
// orchestrator advertises, so a request goes only to one that can honour it (issue #17).

import type { Logger } from 'pino';
import { type Capabilities, type Feature, readCapabilities } from '../protocol/index.ts';
import { getJson } from './upstream.ts';

export interface Orchestrator {
  /** As configured: absolute, or a path on this gateway's own server (`/orchestrator`). */
  url: string;
  caps?: Capabilities | undefined;
  reachable: boolean;
  lastPoll: number;
  /** Set after a failed request: ranked last until then. */
  downUntil: number;
  /** Exponentially weighted ms per output token after the first, measured on real requests. */
  msPerToken?: number | undefined;
  inflight: number;
  registered: boolean;
}

export interface Candidate {
  orchestrator: Orchestrator;
  base: string;
  pricePerToken: number;
  /** Tokens per request (prompt + output) of the model there, when it says. */
  contextLength?: number | undefined;
  /** What to send it in `Authorization: Bearer` (OrchestratorPool: secretFor). */
  secret?: string | undefined;
  /** What it can honour beyond plain chat (Capabilities.features; none when it does not say). */
  features: readonly Feature[];
}

export class OrchestratorPool {
  readonly #list = new Map<string, Orchestrator>();
  readonly #resolveBase: (url: string) => string | undefined;
  readonly #secret: string | undefined;
  readonly #localSecret: string | undefined;
  readonly #pollMs: number;
  readonly #log: Logger;
  #timer: NodeJS.Timeout | undefined;
  #refreshing: Promise<void> | undefined;

  /**
   * `secret` goes to every orchestrator given as an absolute URL (MEDIAPLANE_ORCHESTRATOR_SECRET);
   * `localSecret`, when set, to those given as a path on this same server instead: the local
   * orchestrator of `mediaplane start` has its own, which must not travel to the others.
   */
  constructor(opts: {
    urls: readonly string[];
    resolveBase: (url: string) => string | undefined;
    secret?: string | undefined;
    localSecret?: string | undefined;
    pollMs: number;
    log: Logger;
  }) {
    this.#resolveBase = opts.resolveBase;
    this.#secret = opts.secret;
    this.#localSecret = opts.localSecret;
    this.#pollMs = opts.pollMs;
    this.#log = opts.log;
    for (const url of opts.urls) this.add(url, false);
  }

  add(url: string, registered: boolean): void {
    const key = url.replace(/\/+$/, '');
    const known = this.#list.get(key);
    if (known) {
      known.lastPoll = 0;
      return;
    }
    this.#list.set(key, { url: key, reachable: false, lastPoll: 0, downUntil: 0, inflight: 0, registered });
    if (registered) this.#log.info({ orchestrator: key }, 'orchestrator registered');
  }

  start(): void {
    this.#timer = setInterval(() => void this.refresh(), this.#pollMs);
    this.#timer.unref();
  }

  stop(): void {
    clearInterval(this.#timer);
  }

  all(): Orchestrator[] {
    return [...this.#list.values()];
  }

  /** Polls every orchestrator once (concurrent callers share one round). */
  refresh(): Promise<void> {
    this.#refreshing ??= Promise.all(this.all().map((o) => this.#poll(o))).then(() => {
      this.#refreshing = undefined;
    });
    return this.#refreshing;
  }

  async #poll(o: Orchestrator): Promise<void> {
    const base = this.#resolveBase(o.url);
    if (!base) return;
    try {
      const read = readCapabilities(
        await getJson<unknown>(`${base}/capabilities`, {
          secret: this.#secretFor(o),
          timeoutMs: Math.min(2000, this.#pollMs * 2),
        }),
      );
      // A malformed advertisement is refused by name (issue #26), logged on every poll that gets one.
      if ('error' in read) {
        this.#log.warn({ orchestrator: o.url, problems: read.error.messages }, 'orchestrator capabilities refused');
        throw read.error;
      }
      const { caps } = read;
      if (!o.reachable)
        this.#log.info({ orchestrator: o.url, models: caps.models.map((m) => m.id) }, 'orchestrator reachable');
      o.caps = caps;
      o.reachable = true;
    } catch (err) {
      if (o.reachable) this.#log.warn({ orchestrator: o.url, err: (err as Error).message }, 'orchestrator unreachable');
      o.reachable = false;
    }
    o.lastPoll = Date.now();
  }

  #secretFor(o: Orchestrator): string | undefined {
    return o.url.startsWith('/') ? (this.#localSecret ?? this.#secret) : this.#secret;
  }

  /** Whether any known orchestrator has been polled recently (else a request re-polls first). */
  fresh(): boolean {
    const now = Date.now();
    return this.all().every((o) => now - o.lastPoll < Math.min(this.#pollMs, 1000) || o.reachable);
  }

  offers(model: string): boolean {
    return this.all().some((o) => o.reachable && o.caps?.models.some((m) => m.id === model));
  }

  /** Orchestrators that serve `model` at or under `ceiling` (0: none), best first. */
  candidates(model: string, ceiling: number): Candidate[] {
    const now = Date.now();
    const out: Array<Candidate & { warm: boolean; free: boolean; down: boolean }> = [];
    for (const o of this.all()) {
      const m = o.caps?.models.find((x) => x.id === model);
      const base = this.#resolveBase(o.url);
      if (!o.caps || !m || !base) continue;
      if (ceiling > 0 && o.caps.pricePerToken > ceiling) continue;
      out.push({
        orchestrator: o,
        base,
        pricePerToken: o.caps.pricePerToken,
        contextLength: typeof m.contextLength === 'number' ? m.contextLength : undefined,
        secret: this.#secretFor(o),
        features: Array.isArray(o.caps.features) ? o.caps.features : [],
        warm: m.warm,
        free: Math.min(m.free, m.total - o.inflight) > 0,
        down: !o.reachable || o.downUntil > now,
      });
    }
    // Down ones stay at the end: a last resort when the others fail too.
    out.sort(
      (a, b) =>
        Number(a.down) - Number(b.down) ||
        Number(b.warm) - Number(a.warm) ||
        Number(b.free) - Number(a.free) ||
        (a.orchestrator.msPerToken ?? 0) - (b.orchestrator.msPerToken ?? 0) ||
        a.pricePerToken - b.pricePerToken,
    );
    return out.map(({ orchestrator, base, pricePerToken, contextLength, secret, features }) => ({
      orchestrator,
      base,
      pricePerToken,
      contextLength,
      secret,
      features,
    }));
  }

  markDown(o: Orchestrator): void {
    o.downUntil = Date.now() + this.#pollMs;
    o.lastPoll = 0;
  }

  recordLatency(o: Orchestrator, msPerToken: number): void {
    o.msPerToken = o.msPerToken === undefined ? msPerToken : o.msPerToken * 0.8 + msPerToken * 0.2;
  }

  /**
   * The models of the reachable orchestrators: `warm` when one has it loaded, `priced` when one
   * that may answer it (at or under `ceiling`; 0: no ceiling) charges for tokens, so a request
   * for it needs credit (with none priced, it costs nothing).
   */
  models(ceiling = 0): Array<{ id: string; warm: boolean; priced: boolean }> {
    const seen = new Map<string, { warm: boolean; priced: boolean }>();
    for (const o of this.all()) {
      if (!o.reachable || !o.caps) continue;
      const price = o.caps.pricePerToken;
      for (const m of o.caps.models) {
        const s = seen.get(m.id) ?? { warm: false, priced: false };
        s.warm ||= m.warm;
        s.priced ||= price > 0 && (ceiling <= 0 || price <= ceiling);
        seen.set(m.id, s);
      }
    }
    return [...seen].map(([id, s]) => ({ id, ...s })).sort((a, b) => a.id.localeCompare(b.id));
  }
}
