// A TCP proxy on port 0 for tests of connections that break: it forwards every connection to
// `target` and counts the bytes clients send; at a threshold it can cut the connection that
// crosses it (both sockets destroyed, as a network drop does) or hold it still while the test
// does something else (kills the service behind it), deterministically, whatever the speed.

import net from 'node:net';

export interface TcpProxy {
  url: string;
  port: number;
  /** Bytes clients sent through the proxy, all connections together. */
  readonly sent: number;
  /** Where connections go from now on (a restarted service on another port, say). */
  target: { host: string; port: number } | undefined;
  /**
   * Once `sent` reaches `bytes`, `action` runs for the connection crossing it, holding back
   * what is beyond: `cut` destroys both its sockets; `hold` stops forwarding it (the test ends
   * it); either way `then` is called once.
   */
  breakAt(bytes: number, action: 'cut' | 'hold', then?: () => void): void;
  close(): Promise<void>;
}

export async function startTcpProxy(target?: { host: string; port: number }): Promise<TcpProxy> {
  let sent = 0;
  let trap: { bytes: number; action: 'cut' | 'hold'; then: (() => void) | undefined } | undefined;
  const sockets = new Set<net.Socket>();
  const track = (s: net.Socket) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
    s.on('error', () => {});
  };
  const server = net.createServer((client) => {
    track(client);
    const to = proxy.target;
    if (!to) return client.destroy();
    const upstream = net.connect(to.port, to.host);
    track(upstream);
    upstream.on('close', () => client.destroy());
    client.on('close', () => upstream.destroy());
    upstream.pipe(client);
    let held = false;
    client.on('data', (chunk: Buffer) => {
      if (held) return;
      const t = trap;
      if (t && sent + chunk.length >= t.bytes) {
        trap = undefined;
        const head = chunk.subarray(0, Math.max(0, t.bytes - sent));
        sent += head.length;
        upstream.write(head);
        held = true;
        client.pause();
        if (t.action === 'cut') {
          client.destroy();
          upstream.destroy();
        }
        t.then?.();
        return;
      }
      sent += chunk.length;
      if (!upstream.write(chunk)) {
        client.pause();
        upstream.once('drain', () => held || client.resume());
      }
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as net.AddressInfo).port;
  const proxy: TcpProxy = {
    url: `http://127.0.0.1:${port}`,
    port,
    get sent() {
      return sent;
    },
    target,
    breakAt(bytes, action, then) {
      trap = { bytes, action, then };
    },
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
  return proxy;
}
