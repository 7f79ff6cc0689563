// The console: sign in with an API key, then the pages of pages/index.ts under one nav.
// It calls the public API only (STYLE.md 14), with the key kept in sessionStorage.

import { render } from 'preact';
import { useEffect, useId, useRef, useState } from 'preact/hooks';
import { api, apiKey, setApiKey } from './api.ts';
import { Button, describedBy, Field, Icon } from './components/index.ts';
import { useAction } from './hooks.ts';
import { HOME, pages } from './pages/index.ts';
import { href, useRoute } from './router.ts';
import './style.css';

/** Checks a key the way any client would: one cheap authenticated call. */
async function verifyKey(key: string): Promise<void> {
  setApiKey(key);
  try {
    await api('GET', '/api/task?limit=1');
  } catch (e) {
    setApiKey(null);
    throw e;
  }
}

function SignIn({ onSignedIn }: { onSignedIn: () => void }) {
  const id = useId();
  const [key, setKey] = useState('');
  const signIn = useAction(async () => {
    await verifyKey(key.trim());
    onSignedIn();
  });
  const { busy, error } = signIn;
  const submit = (e: Event) => {
    e.preventDefault();
    void signIn.run();
  };
  const hint = (
    <>
      Make one with <code>./mediaplane keys create --owner you</code> in the service's folder. It stays in this tab
      only.
    </>
  );
  return (
    <main id="main" class="signin">
      <h1>Mediaplane console</h1>
      <form onSubmit={submit} class="card">
        <Field id={id} label="API key" error={error} hint={hint}>
          <input
            id={id}
            type="password"
            autocomplete="off"
            required
            value={key}
            onInput={(e) => setKey(e.currentTarget.value)}
            aria-invalid={error ? true : undefined}
            aria-describedby={describedBy(id, { error, hint })}
          />
        </Field>
        <Button type="submit" variant="primary" busy={busy}>
          Sign in
        </Button>
      </form>
    </main>
  );
}

function Shell({ onSignOut }: { onSignOut: () => void }) {
  const route = useRoute();
  const current = pages.find((p) => p.id === route[0]) ?? pages.find((p) => p.id === HOME);
  const mainRef = useRef<HTMLElement>(null);
  // A new page: focus its heading, so keyboard and screen reader users start there.
  const routeKey = route.join('/');
  useEffect(() => {
    const h1 = mainRef.current?.querySelector('h1');
    if (h1 && document.activeElement !== document.body) {
      h1.setAttribute('tabindex', '-1');
      h1.focus();
    }
    if (h1) document.title = `${h1.textContent} · Mediaplane`;
  }, [routeKey]);
  return (
    <>
      <button type="button" class="skip" onClick={() => mainRef.current?.focus()}>
        Skip to content
      </button>
      <header class="top">
        <span class="brand">
          <img src="/favicon.svg" alt="" width={22} height={22} />
          <span class="brand-name">Mediaplane</span>
        </span>
        <nav aria-label="Main">
          <ul>
            {pages
              .filter((p) => p.nav !== false)
              .map((p) => (
                <li key={p.id}>
                  <a href={href(p.id)} aria-current={p === current ? 'page' : undefined}>
                    {p.title}
                  </a>
                </li>
              ))}
          </ul>
        </nav>
        <Button class="signout" onClick={onSignOut}>
          <Icon name="signOut" />
          <span class="signout-words">Sign out</span>
        </Button>
      </header>
      <main id="main" ref={mainRef} tabIndex={-1}>
        {current && <current.Component key={current.id} route={route.slice(1)} />}
      </main>
    </>
  );
}

function App() {
  const [signedIn, setSignedIn] = useState(() => apiKey() !== null);
  if (!signedIn) return <SignIn onSignedIn={() => setSignedIn(true)} />;
  return (
    <Shell
      onSignOut={() => {
        setApiKey(null);
        setSignedIn(false);
      }}
    />
  );
}

const root = document.getElementById('app');
if (root) render(<App />, root);
