// Self-registration: an orchestrator tells the gateways in MEDIAPLANE_ORCHESTRATOR_REGISTER_WITH
// where it is, with the shared secret, and repeats it so a restarted gateway learns it again.

import type { Logger } from 'pino';

export const REGISTER_PATH = '/llm/orchestrators';
const EVERY_MS = 10_000;

export interface RegistrationOptions {
  /** MEDIAPLANE_ORCHESTRATOR_REGISTER_WITH: the gateways' base URLs. */
  gateways: readonly string[];
  /** MEDIAPLANE_ORCHESTRATOR_SECRET, which the gateways share. */
  secret?: string | undefined;
  /** MEDIAPLANE_ORCHESTRATOR_PUBLIC_URL: where the gateways reach this orchestrator. */
  publicUrl?: string | undefined;
}

export function startRegistration(opts: RegistrationOptions & { log: Logger }): { stop(): void } {
  const { gateways, secret, publicUrl: url } = opts;
  if (gateways.length === 0) return { stop() {} };
  if (!secret || !url) {
    opts.log.warn(
      'MEDIAPLANE_ORCHESTRATOR_REGISTER_WITH is set but MEDIAPLANE_ORCHESTRATOR_SECRET or MEDIAPLANE_ORCHESTRATOR_PUBLIC_URL is not: not registering',
    );
    return { stop() {} };
  }
  const failing = new Set<string>();
  const once = async (): Promise<void> => {
    for (const gw of gateways) {
      try {
        const res = await fetch(gw.replace(/\/+$/, '') + REGISTER_PATH, {
          method: 'POST',
          headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json' },
          body: JSON.stringify({ url }),
          signal: AbortSignal.timeout(5000),
        });
        if (!res.ok) throw new Error(`gateway answered ${res.status}`);
        if (failing.delete(gw)) opts.log.info({ gateway: gw }, 'registered with gateway again');
      } catch (err) {
        // Logged once per outage, not every round.
        if (!failing.has(gw))
          opts.log.warn({ gateway: gw, err: (err as Error).message }, 'cannot register with gateway; will retry');
        failing.add(gw);
      }
    }
  };
  void once();
  const timer = setInterval(() => void once(), EVERY_MS);
  timer.unref();
  return { stop: () => clearInterval(timer) };
}
