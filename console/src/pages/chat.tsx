// Chat: a model from GET /v1/models, a streamed answer from POST /v1/chat/completions
// (chat-stream.ts), temperature and max_tokens, an optional JSON-schema output, and, for a
// priced model, what the request cost with the credit left, read from GET /api/ledger
// (chat-cost.tsx says why). A model that costs nothing (`priced: false`, the local
// orchestrator's) shows no credit: "$0 left" reads as "buy credit". With no model at all, the
// page says how to get one (chat-no-model.tsx). An error sits next to the control it names
// (the LLM error's `param`), else by Send.

import { useEffect, useId, useRef, useState } from 'preact/hooks';
import { api } from '../api.ts';
import { DetailedApiError, withRetryAfter } from '../api-detail.ts';
import { Button, describedBy, ErrorText, Field } from '../components/index.ts';
import { useLoad } from '../hooks.ts';
import type { PageProps } from '../router.ts';
import type { Ledger, LedgerEntry, ModelList } from '../wire.ts';
import { CostPanel, ledgerAfter, readLedger } from './chat-cost.tsx';
import { NoModel } from './chat-no-model.tsx';
import {
  ChatSettings,
  type ErrorPlace,
  jsonSchemaOf,
  placeOf,
  type Settings,
  settingsError,
} from './chat-settings.tsx';
import { type ChatMessage, type StreamProgress, streamChat } from './chat-stream.ts';

function Conversation({ messages, live }: { messages: ChatMessage[]; live: StreamProgress | undefined }) {
  if (messages.length === 0 && !live) return <p class="hint">No messages yet.</p>;
  return (
    <ol class="chat-log" aria-label="Conversation">
      {messages.map((m, i) => (
        <li key={i} class={`chat-msg chat-${m.role}`}>
          <span class="chat-role">{m.role === 'user' ? 'You' : 'Model'}</span>
          <div class="chat-text">{m.content}</div>
        </li>
      ))}
      {live && (
        <li class="chat-msg chat-assistant" aria-busy="true">
          <span class="chat-role">Model</span>
          <div class="chat-text">{live.text || '…'}</div>
        </li>
      )}
    </ol>
  );
}

function useCost() {
  const [ledger, setLedger] = useState<Ledger | undefined>(undefined);
  const [charge, setCharge] = useState<LedgerEntry | undefined>(undefined);
  const [asked, setAsked] = useState(false);
  const [error, setError] = useState<unknown>(undefined);
  const settle = async (requestId: string | undefined) => {
    setAsked(true);
    try {
      if (!requestId) {
        setLedger(await readLedger());
        setCharge(undefined);
        return;
      }
      const r = await ledgerAfter(requestId);
      setLedger(r.ledger);
      setCharge(r.charge);
      setError(undefined);
    } catch (e) {
      setError(e);
    }
  };
  useEffect(() => {
    readLedger().then(setLedger, setError);
  }, []);
  return { ledger, charge, asked, error, settle };
}

/** The conversation and one streamed request at a time; the cost is read when each ends. */
function useChat(settings: Settings, onEnd: (requestId: string | undefined) => void) {
  const [messages, setMessages] = useState<ChatMessage[]>([]);
  const [live, setLive] = useState<StreamProgress | undefined>(undefined);
  const [error, setError] = useState<unknown>(undefined);
  const [status, setStatus] = useState('');
  const stop = useRef<AbortController | undefined>(undefined);
  /** Sends `text`; false when it was refused before any answer (the page gives the text back). */
  const send = async (text: string): Promise<boolean> => {
    if (live) return false;
    const invalid =
      settingsError(settings) ??
      (text.trim() ? undefined : new DetailedApiError(0, ['Write a message first.'], { param: 'messages' }));
    if (invalid) {
      setError(invalid);
      return false;
    }
    const asked: ChatMessage[] = [...messages, { role: 'user', content: text }];
    setMessages(asked);
    setError(undefined);
    setStatus('Streaming the answer…');
    setLive({ text: '' });
    const controller = new AbortController();
    stop.current = controller;
    let last: StreamProgress | undefined;
    let refused = false;
    try {
      const parsed = jsonSchemaOf(settings);
      const o = { model: settings.model, messages: asked, temperature: settings.temperature };
      const options = {
        ...o,
        maxTokens: settings.maxTokens,
        ...(parsed && !(parsed instanceof DetailedApiError) ? { jsonSchema: parsed } : {}),
      };
      last = await streamChat(
        options,
        (p) => {
          last = p;
          setLive(p);
        },
        controller.signal,
      );
      const u = last.usage;
      const tokens = u ? `, ${u.prompt_tokens} prompt + ${u.completion_tokens} completion tokens` : '';
      setStatus(`Answer complete (${last.finishReason ?? 'no finish reason'}${tokens}).`);
    } catch (e) {
      const stopped = (e as Error).name === 'AbortError';
      setStatus(stopped ? 'Stopped.' : '');
      if (!stopped) setError(e);
      refused = !stopped && !last?.text;
    } finally {
      stop.current = undefined;
      setLive(undefined);
      if (last?.text) setMessages([...asked, { role: 'assistant', content: last.text }]);
      else if (refused) setMessages(messages);
      onEnd(last?.id);
    }
    return !refused;
  };
  const clear = () => live || setMessages([]);
  return { messages, live, error, status, send, stop: () => stop.current?.abort(), clear };
}

export function ChatPage(_props: PageProps) {
  const models = useLoad(() => api<ModelList>('GET', '/v1/models'), []);
  const [chosen, setSettings] = useState<Settings>({ model: '', temperature: 1, maxTokens: 64, json: false });
  const [text, setText] = useState('');
  const cost = useCost();
  const modelList = models.data?.data ?? [];
  const settings = { ...chosen, model: chosen.model || modelList[0]?.id || '' };
  const model = modelList.find((m) => m.id === settings.model);
  const none = models.data !== undefined && modelList.length === 0;
  const chat = useChat(settings, (id) => void cost.settle(id));
  const ids = { message: useId(), send: useId() };
  const place = placeOf(chat.error);
  const shown = withRetryAfter(chat.error);
  const at = (p: ErrorPlace) => (place === p ? shown : undefined);
  const submit = async (ev: Event) => {
    ev.preventDefault();
    const sent = text;
    setText('');
    if (!(await chat.send(sent))) setText(sent);
  };
  return (
    <section>
      <h1>Chat</h1>
      <p class="hint">Text generation through the gateway: POST /v1/chat/completions, streamed.</p>
      <ErrorText error={models.error} />
      {none && <NoModel />}
      <form onSubmit={submit} class="chat">
        <ChatSettings
          models={modelList}
          loading={models.loading}
          value={settings}
          onChange={setSettings}
          error={place === 'send' || place === 'message' ? undefined : shown}
          place={place}
        />
        <Conversation messages={chat.messages} live={chat.live} />
        <Field id={ids.message} label="Message" error={at('message')} hint="Ctrl+Enter sends">
          <textarea
            id={ids.message}
            rows={3}
            value={text}
            onInput={(e) => setText(e.currentTarget.value)}
            onKeyDown={(e) => {
              if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) e.currentTarget.form?.requestSubmit();
            }}
            aria-describedby={describedBy(ids.message, { error: at('message'), hint: true })}
          />
        </Field>
        <div class="row">
          <Button type="submit" variant="primary" disabled={!settings.model} aria-describedby={`${ids.send}-error`}>
            Send
          </Button>
          {chat.live && <Button onClick={chat.stop}>Stop</Button>}
          <Button onClick={chat.clear}>Clear conversation</Button>
          <span role="status" class="hint">
            {chat.status}
          </span>
        </div>
        <ErrorText error={at('send')} id={`${ids.send}-error`} />
      </form>
      {model && model.priced !== false && (
        <CostPanel ledger={cost.ledger} charge={cost.charge} asked={cost.asked} error={cost.error} />
      )}
      {model?.priced === false && (
        <p class="hint chat-free">{model.id} costs nothing on this server: no credit is needed.</p>
      )}
    </section>
  );
}
