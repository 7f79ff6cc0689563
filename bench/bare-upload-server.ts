// The baseline of bench/upload.ts: a bare node:http server that pipes each PUT's body to a
// file in BENCH_UPLOAD_DIR (the same disk as the service's data dir) and answers 200 once it
// is written. No routing, no auth, no database, no limit.
import { createWriteStream } from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';

const dir = process.env.BENCH_UPLOAD_DIR ?? '.';
let n = 0;
const server = http.createServer((req, res) => {
  const file = path.join(dir, `bare-${n++}`);
  pipeline(req, createWriteStream(file)).then(
    () => res.writeHead(200).end(),
    () => res.writeHead(500).end(),
  );
});
server.listen(0, '127.0.0.1', () => {
  const { port } = server.address() as { port: number };
  process.stdout.write(`${JSON.stringify({ url: `http://127.0.0.1:${port}` })}\n`);
});
