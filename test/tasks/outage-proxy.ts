import net from 'node:net';

// A TCP proxy in front of a server (the tests' S3) that can be taken down and brought back:
// while down, every connection, open or new, is reset, as when the server's host goes away
// and comes back at the same address. Used by the retry tests and bench/soak.ts.

export interface OutageProxy {
  /** http://127.0.0.1:<port> of the proxy. */
  endpoint: string;
  /** Resets every open connection and every new one until `up()`. */
  down(): void;
  up(): void;
  readonly isDown: boolean;
  /** Connections reset while down. */
  readonly refused: number;
  close(): Promise<void>;
}

export async function startOutageProxy(upstream: string): Promise<OutageProxy> {
  const target = new URL(upstream);
  const open = new Set<net.Socket>();
  let isDown = false;
  let refused = 0;
  const server = net.createServer((client) => {
    if (isDown) {
      refused++;
      reset(client);
      return;
    }
    const server = net.connect(Number(target.port), target.hostname);
    for (const s of [client, server]) {
      open.add(s);
      s.on('close', () => open.delete(s));
      s.on('error', () => {
        client.destroy();
        server.destroy();
      });
    }
    client.pipe(server).pipe(client);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const port = (server.address() as net.AddressInfo).port;
  return {
    endpoint: `http://127.0.0.1:${port}`,
    down() {
      isDown = true;
      for (const s of open) reset(s);
    },
    up() {
      isDown = false;
    },
    get isDown() {
      return isDown;
    },
    get refused() {
      return refused;
    },
    async close() {
      for (const s of open) s.destroy();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

function reset(s: net.Socket): void {
  try {
    s.resetAndDestroy();
  } catch {
    s.destroy();
  }
}
