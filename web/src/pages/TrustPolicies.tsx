// Trust policies (admins): which CI jobs open sessions on which states (docs/ci.md). The list
// with the server's warnings on it (names-only matching, no claim conditions, policies made
// before a rule they break), a form to add one starting from the GitHub Actions or GitLab CI
// conditions that warns and hints as it is filled in, and removal after a confirmation; then
// the org's protected states, which name these policies.

import { useState } from 'preact/hooks';

import { api } from '../api';
import { Confirm, ErrorText } from '../components';
import { useLoad } from '../loading';
import { claimsText, orgRules, parseClaims, PRESETS, warnings } from '../trust';
import type { Identity, TrustPolicies, TrustPolicy } from '../types';
import { ProtectedStatesSection } from './ProtectedStates';

export function TrustPoliciesPage(props: { me: Identity }) {
  const allowed = props.me.role === 'admin';
  const loaded = useLoad(allowed ? () => api<TrustPolicies>('GET', '/api/org/trust-policies') : null, []);
  const [removing, setRemoving] = useState<string | null>(null);
  const [failed, setFailed] = useState<string | null>(null);
  const [notice, setNotice] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);

  if (!allowed) {
    return (
      <>
        <h1>Trust policies</h1>
        <p class="reason">Trust policies need the admin role; yours is {props.me.role}.</p>
      </>
    );
  }
  const list = loaded.value;
  if (!list) return <ErrorText error={loaded.error} />;
  const reload = async () => loaded.set(await api<TrustPolicies>('GET', '/api/org/trust-policies'));
  const remove = async (name: string) => {
    setBusy(true);
    try {
      await api('DELETE', `/api/org/trust-policies/${encodeURIComponent(name)}`);
      await reload();
      setRemoving(null);
      setFailed(null);
      setNotice(`Trust policy ${name} removed.`);
    } catch (e) {
      setFailed((e as Error).message);
    } finally {
      setBusy(false);
    }
  };

  return (
    <>
      <h1>Trust policies</h1>
      <p>
        A CI job (GitHub Actions, GitLab CI) exchanges its OpenID Connect ID token for a session on the states a policy
        names, with its role, when the token comes from the policy's issuer for its audience and matches every claim
        condition. No secret is stored in the CI system.
      </p>
      {notice && (
        <p class="notice" role="status">
          {notice}
        </p>
      )}
      {list.warnings.length > 0 && (
        <section class="warning trust-warnings" aria-labelledby="trust-warnings">
          <h2 id="trust-warnings">What to know about these policies</h2>
          <ul>
            {list.warnings.map((w) => (
              <li>{w}</li>
            ))}
          </ul>
        </section>
      )}
      {list.policies.length === 0 ? (
        <p>No trust policy yet: no CI job can open a session.</p>
      ) : (
        <table class="trust">
          <caption class="visually-hidden">Trust policies of {list.org}</caption>
          <thead>
            <tr>
              <th scope="col">Name</th>
              <th scope="col">Issuer and audience</th>
              <th scope="col">Claims</th>
              <th scope="col">Role</th>
              <th scope="col">States</th>
              <th scope="col">Session</th>
              <th scope="col">
                <span class="visually-hidden">Remove</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {list.policies.map((p: TrustPolicy) => (
              <tr>
                <th scope="row">{p.name}</th>
                <td>
                  <code>{p.issuer}</code>
                  <div class="muted">{p.audience}</div>
                </td>
                <td>
                  <code>{claimsText(p)}</code>
                </td>
                <td>{p.role}</td>
                <td>{p.states.join(', ')}</td>
                <td class="nowrap">{p.session_seconds} s</td>
                <td>
                  <button type="button" class="secondary" aria-label={`Remove ${p.name}`} onClick={() => setRemoving(p.name)}>
                    Remove
                  </button>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <AddPolicy
        org={list.org}
        onAdded={async (name) => {
          await reload();
          setNotice(`Trust policy ${name} added.`);
        }}
      />
      <ProtectedStatesSection policies={list.policies} />
      {removing && (
        <Confirm
          title={`Remove trust policy ${removing}?`}
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
          <p>No new session opens under it. Sessions it opened run to their end.</p>
        </Confirm>
      )}
    </>
  );
}

function AddPolicy(props: { org: string; onAdded: (name: string) => Promise<void> }) {
  const [preset, setPreset] = useState('github');
  const [name, setName] = useState('');
  const [issuer, setIssuer] = useState(PRESETS.github.issuer);
  // A new policy's audience must end with the org's name (the server refuses it otherwise);
  // this server's address before it is what jobs usually ask for.
  const [audience, setAudience] = useState(`${location.origin}/orgs/${props.org}`);
  const [claims, setClaims] = useState(PRESETS.github.claims);
  const [role, setRole] = useState('operator');
  const [states, setStates] = useState('');
  const [seconds, setSeconds] = useState('3600');
  const [failed, setFailed] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const parsed = parseClaims(claims);
  const warned =
    'claims' in parsed
      ? [
          ...orgRules({ issuer: issuer.trim(), audience: audience.trim(), claims: parsed.claims }, props.org),
          ...warnings(parsed.claims),
        ]
      : [];

  const choose = (key: string) => {
    setPreset(key);
    setIssuer(PRESETS[key].issuer);
    setClaims(PRESETS[key].claims);
  };
  const add = async (e: Event) => {
    e.preventDefault();
    if ('error' in parsed) {
      setFailed(parsed.error);
      return;
    }
    setBusy(true);
    try {
      const body = {
        name: name.trim(),
        issuer: issuer.trim(),
        audience: audience.trim(),
        claims: parsed.claims,
        role,
        states: states
          .split(',')
          .map((s) => s.trim())
          .filter((s) => s !== ''),
        session_seconds: Number(seconds),
      };
      await api('POST', '/api/org/trust-policies', body);
      setFailed(null);
      setName('');
      await props.onAdded(body.name);
    } catch (err) {
      setFailed((err as Error).message);
    } finally {
      setBusy(false);
    }
  };

  return (
    <form class="trust-add" onSubmit={add} aria-labelledby="add-policy">
      <h2 id="add-policy">Add a trust policy</h2>
      <label>
        Start from
        <select value={preset} onChange={(e) => choose((e.target as HTMLSelectElement).value)}>
          {Object.entries(PRESETS).map(([key, p]) => (
            <option value={key}>{p.label}</option>
          ))}
        </select>
      </label>
      <label>
        Name
        <input value={name} required onInput={(e) => setName((e.target as HTMLInputElement).value)} />
      </label>
      <label>
        Issuer
        <input value={issuer} required onInput={(e) => setIssuer((e.target as HTMLInputElement).value)} />
      </label>
      <label>
        Audience
        <input
          value={audience}
          required
          aria-describedby="audience-rule"
          onInput={(e) => setAudience((e.target as HTMLInputElement).value)}
        />
      </label>
      <p id="audience-rule" class="muted">
        What the job asks its token for; it must end with /{props.org}, the org's name, so no other org takes it.
      </p>
      <label>
        Claim conditions (one claim=value a line)
        <textarea
          rows={5}
          value={claims}
          aria-describedby="claims-rule"
          onInput={(e) => setClaims((e.target as HTMLTextAreaElement).value)}
        />
      </label>
      <p id="claims-rule" class="muted">
        In a value, * stands for any run of characters within one segment (no / or :), ** for any run. On GitHub Actions
        and GitLab.com, hold an exact owner or repository id (repository_owner_id or repository_id, namespace_id or
        project_id).
      </p>
      {warned.map((w) => (
        <p class="warning" role="note">
          {w}
        </p>
      ))}
      <label>
        Role
        <select value={role} onChange={(e) => setRole((e.target as HTMLSelectElement).value)}>
          <option value="operator">operator</option>
          <option value="viewer">viewer</option>
        </select>
      </label>
      <label>
        States (name patterns, comma-separated)
        <input value={states} required onInput={(e) => setStates((e.target as HTMLInputElement).value)} />
      </label>
      <label>
        Longest session, in seconds
        <input
          type="number"
          min={1}
          max={86400}
          value={seconds}
          required
          onInput={(e) => setSeconds((e.target as HTMLInputElement).value)}
        />
      </label>
      <ErrorText error={failed} />
      <div class="buttons">
        <button type="submit" disabled={busy}>
          Add policy
        </button>
      </div>
    </form>
  );
}
