// Deleted states (admins): what deleting a state keeps for the server's retention, a page at
// a time; each restored under its name or a new one typed in its row, or purged now once its
// name is typed in the confirmation.

import { useState } from 'preact/hooks';

import { api, ApiError, seg } from '../api';
import { Confirm, ErrorText, Link, Time, TypedName } from '../components';
import { purgeRefusal, restoreBody, restoreRefusal } from '../deleted';
import { actor, bytes } from '../format';
import { Pager, usePaged } from '../loading';
import { nameProblem } from '../names';
import type { DeletedState, DeletedStateList, Identity, Restored } from '../types';

const PAGE = 50;

/** What the last restore or purge did, shown above the list (whose row it was is gone). */
type Done = { kind: 'restored'; restored: Restored } | { kind: 'purged'; name: string } | null;

export function DeletedPage(props: { me: Identity; location: URL }) {
  // The routes need the admin role whatever the allocation; whoami says it as the role.
  const admin = props.me.role === 'admin';
  const paged = usePaged<DeletedStateList>({
    location: props.location,
    from: '/api/deleted-states',
    here: '/deleted-states',
    size: PAGE,
    enabled: admin,
  });
  const { value: list, error, cursor } = paged;
  const [done, setDone] = useState<Done>(null);
  const [purging, setPurging] = useState<DeletedState | null>(null);
  const [purgeError, setPurgeError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);

  if (!admin) {
    return (
      <>
        <h1>Deleted states</h1>
        <p class="reason">Deleted states need the admin role; yours is {props.me.role}.</p>
      </>
    );
  }
  const closePurge = () => {
    setPurging(null);
    setPurgeError(null);
  };
  const purge = async (d: DeletedState) => {
    setBusy(true);
    setPurgeError(null);
    try {
      await api('DELETE', `/api/deleted-states/${seg(d.id)}`);
      closePurge();
      setDone({ kind: 'purged', name: d.name });
      await paged.reload();
    } catch (e) {
      setPurgeError(purgeRefusal(e as ApiError));
    } finally {
      setBusy(false);
    }
  };
  const restored = async (r: Restored) => {
    setDone({ kind: 'restored', restored: r });
    await paged.reload();
  };

  return (
    <>
      <h1>Deleted states</h1>
      <p>
        A deleted state keeps every version until its purge date: restore it, under its name or a new one, and its
        latest version is current again; or purge it now, after which it cannot come back.
      </p>
      <DoneNotice done={done} />
      <ErrorText error={error} />
      {list && list.deleted_states.length === 0 && !cursor && (
        <p>
          No deleted state is kept now. A deleted state is kept for the server's retention,{' '}
          <code>HEGEMONY_TF_STATE_DELETED_RETENTION_DAYS</code> (7 days unless set; 0 keeps none), then purged.
        </p>
      )}
      {list && list.deleted_states.length > 0 && (
        <table class="deleted">
          <thead>
            <tr>
              <th scope="col">Name</th>
              <th scope="col">Deleted</th>
              <th scope="col">Versions</th>
              <th scope="col">Size</th>
              <th scope="col">Purged</th>
              <th scope="col">Restore</th>
              <th scope="col">Purge</th>
            </tr>
          </thead>
          <tbody>
            {list.deleted_states.map((d) => (
              <tr key={d.id}>
                <th scope="row">{d.name}</th>
                <td>
                  <Time at={d.deleted_at} />
                  <span class="muted"> by {actor(d.deleted_by)}</span>
                </td>
                <td>{d.versions}</td>
                <td class="nowrap">{bytes(d.bytes)}</td>
                <td>
                  <Time at={d.purge_at} />
                </td>
                <td>
                  <RestoreForm deleted={d} onRestored={restored} />
                </td>
                <td>
                  <button type="button" class="danger" onClick={() => setPurging(d)}>
                    Purge now
                  </button>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <Pager of={paged} label="Pages of deleted states" />
      {purging && (
        <PurgeDialog
          deleted={purging}
          busy={busy}
          error={purgeError}
          onConfirm={() => purge(purging)}
          onCancel={closePurge}
        />
      )}
    </>
  );
}

function DoneNotice(props: { done: Done }) {
  const { done } = props;
  if (!done) return null;
  if (done.kind === 'purged') {
    return (
      <p class="notice" role="status">
        Purged {done.name}: its versions are deleted, and it can no longer be restored.
      </p>
    );
  }
  const r = done.restored;
  return (
    <p class="notice" role="status">
      Restored {r.name}: {r.versions} {r.versions === 1 ? 'version' : 'versions'}, version {r.version} current.{' '}
      <Link href={`/states/${encodeURIComponent(r.name)}`}>Open {r.name}</Link>
    </p>
  );
}

/**
 * A row's restore: the name field starts as the name the state had (restored under it as it
 * is), and a refusal is said next to it, so the person types another name there and then.
 */
function RestoreForm(props: { deleted: DeletedState; onRestored: (r: Restored) => Promise<void> }) {
  const { deleted } = props;
  const [typed, setTyped] = useState(deleted.name);
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const problem = nameProblem(typed);
  const field = `restore-${deleted.id}`;
  const submit = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      const restored = await api<Restored>('POST', `/api/deleted-states/${seg(deleted.id)}/restore`, restoreBody(deleted.name, typed));
      await props.onRestored(restored);
    } catch (e) {
      setError(restoreRefusal(e as ApiError, typed));
    } finally {
      setBusy(false);
    }
  };
  return (
    <form class="restore" onSubmit={submit}>
      <input
        id={field}
        aria-label={`Name to restore ${deleted.name} under`}
        aria-invalid={problem ? 'true' : undefined}
        aria-describedby={problem || error ? `${field}-why` : undefined}
        value={typed}
        autoComplete="off"
        spellcheck={false}
        onInput={(e) => {
          setTyped((e.target as HTMLInputElement).value);
          setError(null);
        }}
      />
      <button type="submit" class="secondary" disabled={problem !== null || busy}>
        Restore
      </button>
      {(problem || error) && (
        <p id={`${field}-why`} class="error" role="alert">
          {problem ?? error}
        </p>
      )}
    </form>
  );
}

function PurgeDialog(props: {
  deleted: DeletedState;
  busy: boolean;
  error: string | null;
  onConfirm: () => void;
  onCancel: () => void;
}) {
  const { name, versions, purge_at } = props.deleted;
  // What is typed goes with the dialog: opened again, it starts empty.
  const [typed, setTyped] = useState('');
  return (
    <Confirm
      title={`Purge ${name} now?`}
      confirm="Purge now"
      danger
      busy={props.busy}
      error={props.error}
      confirmable={typed === name}
      onConfirm={props.onConfirm}
      onCancel={props.onCancel}
    >
      <p>
        Its {versions} {versions === 1 ? 'version goes' : 'versions go'} now instead of <Time at={purge_at} />, and it can
        no longer be restored. This cannot be undone.
      </p>
      <TypedName value={typed} onInput={setTyped} />
    </Confirm>
  );
}
