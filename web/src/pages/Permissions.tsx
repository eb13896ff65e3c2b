// Permissions (admins): which role each of tf_state:read, :write, :manage and :outputs needs, edited
// and saved after a confirmation that says who gains or loses what.

import { useState } from 'preact/hooks';

import { api } from '../api';
import { Confirm, ErrorText } from '../components';
import { useLoad } from '../loading';
import { changes, PERMISSIONS, ROLES, sentence, WHAT } from '../permissions';
import type { Allocation, Identity, Role } from '../types';

export function PermissionsPage(props: { me: Identity }) {
  const allowed = props.me.allowed_actions.permissions;
  const loaded = useLoad(allowed ? () => api<Allocation>('GET', '/api/org/permissions') : null, []);
  // The edited allocation; null while it is the saved one.
  const [edited, setEdited] = useState<Allocation | null>(null);
  const [confirming, setConfirming] = useState(false);
  // Why saving failed.
  const [failed, setFailed] = useState<string | null>(null);
  const [notice, setNotice] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);

  if (!allowed) {
    return (
      <>
        <h1>Permissions</h1>
        <p class="reason">Permissions need the admin role; yours is {props.me.role}.</p>
      </>
    );
  }
  const saved = loaded.value;
  if (!saved) return <ErrorText error={loaded.error} />;
  const draft = edited ?? saved;
  const pending = changes(saved, draft);
  const save = async () => {
    setBusy(true);
    try {
      const body = Object.fromEntries(pending.map((c) => [c.permission, c.to]));
      loaded.set(await api<Allocation>('PUT', '/api/org/permissions', body));
      setEdited(null);
      setConfirming(false);
      setNotice('Saved.');
      setFailed(null);
    } catch (e) {
      setFailed((e as Error).message);
    } finally {
      setBusy(false);
    }
  };

  return (
    <>
      <h1>Permissions</h1>
      <p>
        Each permission goes to a role and every role above it (viewer &lt; operator &lt; admin), or to nobody. The
        admin role always keeps the audit log and this page.
      </p>
      {notice && (
        <p class="notice" role="status">
          {notice}
        </p>
      )}
      <form
        onSubmit={(e) => {
          e.preventDefault();
          setNotice(null);
          setConfirming(true);
        }}
      >
        <table class="permissions">
          <thead>
            <tr>
              <th scope="col">Permission</th>
              <th scope="col">Allows</th>
              <th scope="col">Needs the role</th>
            </tr>
          </thead>
          <tbody>
            {PERMISSIONS.map((p) => (
              <tr>
                <th scope="row">
                  <code>{p}</code>
                </th>
                <td>{WHAT[p]}</td>
                <td>
                  <select
                    aria-label={`Role needed for ${p}`}
                    value={draft[p] ?? ''}
                    onChange={(e) => {
                      const v = (e.target as HTMLSelectElement).value;
                      setEdited({ ...draft, [p]: v === '' ? null : (v as Role) });
                    }}
                  >
                    {ROLES.map((r) => (
                      <option value={r}>{r}</option>
                    ))}
                    <option value="">nobody (disabled)</option>
                  </select>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
        <ErrorText error={failed} />
        <div class="buttons">
          <button type="button" class="secondary" disabled={pending.length === 0} onClick={() => setEdited(null)}>
            Undo changes
          </button>
          <button type="submit" disabled={pending.length === 0}>
            Save changes
          </button>
        </div>
      </form>
      {confirming && (
        <Confirm
          title="Change permissions?"
          confirm="Save changes"
          busy={busy}
          error={failed}
          onConfirm={save}
          onCancel={() => setConfirming(false)}
        >
          <ul>
            {pending.map((c) => (
              <li>{sentence(c)}</li>
            ))}
          </ul>
        </Confirm>
      )}
    </>
  );
}
