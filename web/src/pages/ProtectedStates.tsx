// Protected states (admins), a section of the trust policies page: the org's rules that keep
// the changes of the states a pattern matches to CI jobs of chosen trust policies (docs/ci.md,
// "Protected states"); a form to protect a pattern, choosing among the org's policies, and
// removal after a confirmation.

import { useState } from 'preact/hooks';

import { api } from '../api';
import { Confirm, ErrorText } from '../components';
import { useLoad } from '../loading';
import type { Protection, Protections, TrustPolicy } from '../types';

const RULES = '/api/org/protected-states';

// A pattern's `*` is sent as it is: it is allowed in a path, and the server reads it so.
const path = (pattern: string) => `${RULES}/${encodeURIComponent(pattern).replace(/%2A/g, '*')}`;

export function ProtectedStatesSection(props: { policies: TrustPolicy[] }) {
  const loaded = useLoad(() => api<Protections>('GET', RULES), []);
  const [removing, setRemoving] = useState<string | null>(null);
  const [failed, setFailed] = useState<string | null>(null);
  const [notice, setNotice] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);

  const list = loaded.value;
  if (!list) return <ErrorText error={loaded.error} />;
  const reload = async () => loaded.set(await api<Protections>('GET', RULES));
  const remove = async (pattern: string) => {
    setBusy(true);
    try {
      await api('DELETE', path(pattern));
      await reload();
      setRemoving(null);
      setFailed(null);
      setNotice(`States ${pattern} are no longer protected.`);
    } catch (e) {
      setFailed((e as Error).message);
    } finally {
      setBusy(false);
    }
  };

  return (
    <section aria-labelledby="protected-states">
      <h2 id="protected-states">Protected states</h2>
      <p>
        Only CI jobs of the chosen trust policies may lock, write, roll back, import or delete a protected state; everyone
        else, admins included, is refused. Reading is not affected, and an admin may still force-unlock it. A state
        matched by several patterns is changed only by a policy every one of them names.
      </p>
      {notice && (
        <p class="notice" role="status">
          {notice}
        </p>
      )}
      {list.protections.length === 0 ? (
        <p>No protected state: every state is changed as roles allow.</p>
      ) : (
        <table class="trust">
          <caption class="visually-hidden">Protected states of {list.org}</caption>
          <thead>
            <tr>
              <th scope="col">States</th>
              <th scope="col">Changed only by CI jobs of</th>
              <th scope="col">
                <span class="visually-hidden">Remove</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {list.protections.map((r: Protection) => (
              <tr>
                <th scope="row">
                  <code>{r.pattern}</code>
                </th>
                <td>{r.policies.join(', ')}</td>
                <td>
                  <button
                    type="button"
                    class="secondary"
                    aria-label={`Remove the protection of ${r.pattern}`}
                    onClick={() => setRemoving(r.pattern)}
                  >
                    Remove
                  </button>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <Protect
        policies={props.policies}
        onSet={async (pattern) => {
          await reload();
          setNotice(`States ${pattern} are protected.`);
        }}
      />
      {removing && (
        <Confirm
          title={`Remove the protection of ${removing}?`}
          confirm="Remove"
          danger
          busy={busy}
          error={failed}
          onConfirm={() => remove(removing)}
          onCancel={() => {
            setRemoving(null);
            setFailed(null);
          }}
        >
          <p>The states it matches are then changed as roles allow, by personal tokens too.</p>
        </Confirm>
      )}
    </section>
  );
}

function Protect(props: { policies: TrustPolicy[]; onSet: (pattern: string) => Promise<void> }) {
  const [pattern, setPattern] = useState('');
  const [chosen, setChosen] = useState<string[]>([]);
  const [failed, setFailed] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);

  if (props.policies.length === 0) {
    return <p>Add a trust policy first: a protected state names the policies whose CI jobs may change it.</p>;
  }
  const toggle = (name: string, on: boolean) =>
    setChosen((now) => (on ? [...now, name] : now.filter((n) => n !== name)));
  const protect = async (e: Event) => {
    e.preventDefault();
    if (chosen.length === 0) {
      setFailed('Choose at least one trust policy.');
      return;
    }
    setBusy(true);
    try {
      const trimmed = pattern.trim();
      await api('PUT', path(trimmed), { policies: chosen });
      setFailed(null);
      setPattern('');
      setChosen([]);
      await props.onSet(trimmed);
    } catch (err) {
      setFailed((err as Error).message);
    } finally {
      setBusy(false);
    }
  };

  return (
    <form class="trust-add" onSubmit={protect} aria-labelledby="protect-states">
      <h3 id="protect-states">Protect states</h3>
      <label>
        State name or pattern (* for any run of characters)
        <input value={pattern} required onInput={(e) => setPattern((e.target as HTMLInputElement).value)} />
      </label>
      <fieldset>
        <legend>Trust policies whose CI jobs may change them</legend>
        {props.policies.map((p) => (
          <label class="check">
            <input
              type="checkbox"
              checked={chosen.includes(p.name)}
              onChange={(e) => toggle(p.name, (e.target as HTMLInputElement).checked)}
            />
            {p.name}
          </label>
        ))}
      </fieldset>
      <ErrorText error={failed} />
      <div class="buttons">
        <button type="submit" disabled={busy}>
          Protect
        </button>
      </div>
    </form>
  );
}
