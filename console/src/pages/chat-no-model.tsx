// What the Chat page says when no orchestrator offers a model: no model ships with the service,
// so a fresh install has none, and a greyed-out Send says nothing. The words name the command
// that gets a small model (as the README names commands) and what to do after it.

import { CopyButton } from '../components/index.ts';

/** A small instruct model that runs on a laptop CPU (Apache-2.0, about 400 MB at Q4_K_M). */
export const SUGGESTED_PULL = './mediaplane models pull Qwen/Qwen2.5-0.5B-Instruct-GGUF';

export function NoModel() {
  return (
    <section class="card chat-no-model" aria-labelledby="chat-no-model">
      <h2 id="chat-no-model">No model to chat with yet</h2>
      <p>
        Text generation needs a model on the server, and none comes with it. To get a small one that runs on a laptop
        CPU (Qwen2.5 0.5B Instruct, about 400 MB), run this in the server's folder, then restart the server and open
        this page again:
      </p>
      <pre>
        <code>{SUGGESTED_PULL}</code>
      </pre>
      <CopyButton text={SUGGESTED_PULL} label="Copy the command" />
      <p class="hint">
        Any GGUF model of the model hub can be pulled the same way, by its ORG/NAME:{' '}
        <code>./mediaplane models --help</code> says how.
      </p>
    </section>
  );
}
