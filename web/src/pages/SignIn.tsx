// Sign in: paste a personal access token. It is kept in this tab's sessionStorage only and
// checked with GET /api/whoami before any page uses it.

import { useState } from 'preact/hooks';

import { api, forgetToken, keepToken, takeSignOutReason } from '../api';
import { navigate } from '../router';
import type { Identity } from '../types';

export function SignIn(props: { onSignedIn: (me: Identity) => void }) {
  const [token, setToken] = useState('');
  const [reason] = useState(takeSignOutReason);
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);

  const submit = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    keepToken(token.trim());
    try {
      const me = await api<Identity>('GET', '/api/whoami');
      props.onSignedIn(me);
      navigate('/', true);
    } catch (err) {
      forgetToken();
      setError(`This token was refused: ${(err as Error).message}`);
    } finally {
      setBusy(false);
    }
  };

  return (
    <main class="sign-in">
      <h1>Sign in to Hegemony State</h1>
      {reason && !error && (
        <p class="error" role="alert">
          You were signed out: {reason}
        </p>
      )}
      <form onSubmit={submit}>
        <label for="token">Personal access token</label>
        <input
          id="token"
          type="password"
          autoComplete="off"
          spellcheck={false}
          value={token}
          onInput={(e) => setToken((e.target as HTMLInputElement).value)}
          required
        />
        <button type="submit" disabled={busy || token.trim() === ''}>
          Sign in
        </button>
      </form>
      {error && (
        <p class="error" role="alert">
          {error}
        </p>
      )}
      <p class="help">
        Tokens come from <code>hegemony-state token create --org ORG --user USER --role viewer|operator|admin</code>{' '}
        on the server's machine; a new local store prints its first admin token when the server starts. The token stays
        in this browser tab only, and signing out forgets it.
      </p>
    </main>
  );
}
