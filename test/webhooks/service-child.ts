// The service as a process of its own, for the fault test: the API and worker roles (and so
// a webhook dispatcher) from the settings in the environment, like `mediaplane api` plus a
// worker. It prints "ready" once it serves, and stops gracefully on SIGTERM.
import { loadConfig } from '../../src/config/index.ts';
import { createLogger } from '../../src/lib/log.ts';
import { startRoles } from '../../src/main.ts';

const config = loadConfig({ env: process.env });
const running = await startRoles(config, { api: true, worker: true }, createLogger({ level: config.logLevel }));
process.stdout.write(`ready ${running.url ?? ''}\n`);
process.on('SIGTERM', () => {
  void running.stop().then(() => process.exit(0));
});
