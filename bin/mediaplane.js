#!/usr/bin/env node
// The published entry point. Node >= 22.18 runs the TypeScript sources directly
// (type stripping), so there is no build step and no dist/ to keep in sync.
const [major, minor] = process.versions.node.split('.').map(Number);
if (major < 22 || (major === 22 && minor < 18)) {
  console.error(
    `mediaplane needs Node.js >= 22.18 (Node 24 LTS recommended); this is ${process.versions.node}. Run scripts/setup.sh to install Node 24 into .node/.`,
  );
  process.exit(1);
}
// Before anything allocates: V8's collector tuned for streaming media (src/lib/gc-tuning.ts).
const { tuneGcForStreaming } = await import('../src/lib/gc-tuning.ts');
tuneGcForStreaming();
const { main } = await import('../src/main.ts');
process.exitCode = await main(process.argv.slice(2));
