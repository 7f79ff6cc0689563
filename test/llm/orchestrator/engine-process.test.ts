// The engine's child process dies with its orchestrator, however the orchestrator ends (issue #26,
// as ffmpeg dies with its worker): a real orchestrator process on the vllm engine starts the
// vLLM stand-in (fixtures/fake-vllm.ts), is SIGKILLed, and the stand-in must be gone.

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { pdeathsigWorks } from '../../../src/lib/tied-process.ts';
import { processGone } from '../../../src/tasks/processes.ts';
import { startOrchestratorProcess, TINY } from '../../helpers/llm.ts';
import { waitFor } from '../../helpers/server.ts';
import { childrenOf } from '../../tasks/procfs.ts';

const FAKE = fileURLToPath(new URL('../fixtures/fake-vllm.ts', import.meta.url));

/** The stand-in among `parent`'s children (its command line names the fixture). */
function standIn(parent: number): number | undefined {
  return childrenOf(parent).find((pid) => {
    try {
      return readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('fake-vllm');
    } catch {
      return false;
    }
  });
}

test('a SIGKILLed orchestrator leaves no vLLM process behind', {
  skip: !pdeathsigWorks() && 'setpriv --pdeathsig is not available',
}, async () => {
  const orch = await startOrchestratorProcess({
    MEDIAPLANE_ORCHESTRATOR_ENGINE: 'vllm',
    MEDIAPLANE_ORCHESTRATOR_MODELS: TINY,
    MEDIAPLANE_VLLM_COMMAND: `${process.execPath},${FAKE}`,
    MAX_MODEL_LEN: '1024',
  });
  try {
    // The orchestrator prints its URL once vLLM answered /health: the stand-in runs by now.
    const vllm = standIn(orch.child.pid ?? -1);
    assert.ok(vllm, 'the orchestrator started the vLLM stand-in');
    assert.equal(await processGone(vllm), false);
    await orch.kill('SIGKILL');
    // Generous: the kernel signals at once; only a loaded machine makes it take a moment.
    await waitFor(() => processGone(vllm), 10_000, `the vLLM stand-in (pid ${vllm}) to die with its orchestrator`);
  } finally {
    await orch.kill('SIGKILL');
  }
});
