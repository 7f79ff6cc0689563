import { createSocket } from 'node:dgram';
import { once } from 'node:events';
import net, { type AddressInfo } from 'node:net';

// Ports for a server's settings (RTMP's, SRT's) that nothing listens on now: the test
// server then listens there itself.

/** A TCP port no one listens on now (RTMP's). */
export async function freePort(): Promise<number> {
  const server = net.createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** A UDP port no one listens on now (SRT's relay). */
export async function freeUdpPort(): Promise<number> {
  const socket = createSocket('udp4');
  await new Promise<void>((r) => socket.bind(0, '127.0.0.1', r));
  const { port } = socket.address();
  await new Promise<void>((r) => socket.close(() => r()));
  return port;
}
