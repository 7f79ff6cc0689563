// The baseline of bench/api.ts: a bare Fastify server with routes shaped like ours (JSON body
// in, a Task-sized JSON out), no auth, no database, no validation.
import Fastify from 'fastify';

const task = {
  id: '6f1c8e3a-0b1e-4f63-9a52-1d4f0f7b3c11',
  type: 'transcode-file',
  createdAt: Date.now(),
  status: { phase: 'waiting', updatedAt: Date.now() },
  params: { outputs: { hls: { path: '/out/hls' } } },
};
const app = Fastify({ logger: false });
app.post('/api/transcode', async (req) => ({ ...task, body: req.body }));
app.get('/api/task/:id', async () => task);
const url = await app.listen({ port: 0, host: '127.0.0.1' });
process.stdout.write(`${JSON.stringify({ url })}\n`);
