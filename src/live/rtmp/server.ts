import { createServer, type Server, type Socket } from 'node:net';
import type { IngestListener, PublishGate } from '../ingest-types.ts';
import { type ChunkReaderLimits, DEFAULT_CHUNK_LIMITS } from './chunk-reader.ts';
import { RtmpConnection } from './connection.ts';
import type { RtmpLog } from './publish.ts';

// Our RTMP ingest: one TCP listener, one RtmpConnection per publisher, each on its own: a
// connection that breaks the protocol, stalls or floods is closed alone.

export interface RtmpServerOptions {
  host: string;
  /** 0 picks a free port (tests). */
  port: number;
  log: RtmpLog;
  gate: PublishGate;
  /** A publisher that sends nothing for this long, or does not finish its handshake within it, is cut off. */
  idleTimeoutMs: number;
  /** Bounds on what one connection may make the server hold; the defaults suit publishers of up to 8 MiB a message. */
  limits?: Partial<ChunkReaderLimits>;
  /** Most connections at once. */
  maxConnections?: number;
}

export async function startRtmpServer(o: RtmpServerOptions): Promise<IngestListener> {
  const limits = { ...DEFAULT_CHUNK_LIMITS, ...o.limits };
  const connections = new Set<RtmpConnection>();
  let count = 0;
  const server: Server = createServer((socket: Socket) => {
    count += 1;
    const connection = new RtmpConnection({
      socket,
      gate: o.gate,
      log: o.log,
      idleTimeoutMs: o.idleTimeoutMs,
      limits,
      id: `rtmp-${count}`,
    });
    connections.add(connection);
    socket.once('close', () => connections.delete(connection));
  });
  server.maxConnections = o.maxConnections ?? 1000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(o.port, o.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : o.port;
  return {
    protocol: 'rtmp',
    port,
    async close() {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      for (const connection of connections) connection.cut('the RTMP server is shutting down');
      await closed;
    },
  };
}
