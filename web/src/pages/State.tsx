// A state's page: lineage, the lock or hold in full (a run's hold too before the state's
// first version, so the 423 everyone else gets has a visible cause), the versions with their
// size over time, backend.hcl, and the actions `allowed_actions` allows: download, what changed in a
// version (`?changes=N&since=M` in the address), roll back, force unlock, delete. Each
// destructive action is confirmed first; an action the role allows but the state's
// condition does not is replaced by the reason.

import { useEffect, useState } from 'preact/hooks';

import { api, fetchContent, seg } from '../api';
import { backendHcl } from '../backend';
import { SizeChart } from '../chart';
import { Confirm, CopyButton, ErrorText, Hcl, Holder, Link, RunLink, save, Time } from '../components';
import { countsText, countsWords, versionParam } from '../changes';
import { actor, bytes, ended, exact, shortSha } from '../format';
import { navigate } from '../router';
import type { ChangeCounts, Identity, StateView, Version } from '../types';
import { VersionChanges } from '../versionChanges';

type Dialog = { kind: 'rollback'; version: Version } | { kind: 'unlock' } | { kind: 'delete' } | null;

export function StatePage(props: { me: Identity; name: string; location: URL }) {
  const { me, name } = props;
  const imported = props.location.searchParams.get('imported') === '1';
  const [state, setState] = useState<StateView | null>(null);
  const [versions, setVersions] = useState<Version[]>([]);
  const [error, setError] = useState<string | null>(null);
  const [notice, setNotice] = useState<string | null>(null);
  const [dialog, setDialog] = useState<Dialog>(null);
  const [dialogError, setDialogError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const [typed, setTyped] = useState('');
  // The `+a ~c -r` of each version whose changes (since the version before) were opened:
  // versions never change, so what was counted once stays true while the page is open.
  const [counts, setCounts] = useState<Record<number, ChangeCounts>>({});
  const changesOf = versionParam(props.location.searchParams.get('changes'));
  const since = versionParam(props.location.searchParams.get('since'));

  const path = `/api/tf-states/${seg(name)}`;
  const load = async () => {
    try {
      const [view, list] = await Promise.all([
        api<StateView>('GET', path),
        api<{ versions: Version[] }>('GET', `${path}/versions`),
      ]);
      setState(view);
      setVersions(list.versions);
      setError(null);
    } catch (e) {
      setError((e as Error).message);
    }
  };
  useEffect(() => {
    setCounts({});
    load();
  }, [name]);

  const here = `/states/${seg(name)}`;
  const showChanges = (version: number | null, other: number | null = null) =>
    navigate(version === null ? here : `${here}?changes=${version}${other === null ? '' : `&since=${other}`}`);
  const counted = (version: number, c: ChangeCounts) => setCounts((known) => ({ ...known, [version]: c }));

  const close = () => {
    setDialog(null);
    setDialogError(null);
    setTyped('');
  };
  const act = async (work: () => Promise<string>) => {
    setBusy(true);
    setDialogError(null);
    try {
      const done = await work();
      close();
      setNotice(done);
      await load();
    } catch (e) {
      setDialogError((e as Error).message);
    } finally {
      setBusy(false);
    }
  };
  const rollback = (v: Version) =>
    act(async () => {
      const made = await api<Version>('POST', `${path}/rollback`, { version: v.version });
      return `Rolled back: version ${made.version} has the content of version ${v.version}, serial ${made.serial}.`;
    });
  const unlock = async () => {
    if (state?.latest_version !== null) {
      return act(async () => {
        await api('POST', `${path}/force-unlock`);
        return 'Force-unlocked: the state is free.';
      });
    }
    // A state with no version yet is only its hold: nothing of it is left to show.
    setBusy(true);
    try {
      await api('POST', `${path}/force-unlock`);
      navigate('/', true);
    } catch (e) {
      setDialogError((e as Error).message);
      setBusy(false);
    }
  };
  const remove = async () => {
    setBusy(true);
    try {
      await api('DELETE', path);
      navigate('/', true);
    } catch (e) {
      setDialogError((e as Error).message);
      setBusy(false);
    }
  };
  const download = async (v: Version) => {
    try {
      save(await fetchContent(`${path}/versions/${v.version}/content`), `${name}-v${v.version}.tfstate`);
    } catch (e) {
      setError((e as Error).message);
    }
  };

  if (error && !state) {
    return (
      <>
        <h1>{name}</h1>
        <ErrorText error={error} />
        <Link href="/">Back to Terraform States</Link>
      </>
    );
  }
  if (!state) return <p>Loading…</p>;

  const allowed = state.allowed_actions;
  const held = state.lock !== null || state.hold !== null;
  const blocked =
    held && (me.allowed_actions.rollback || me.allowed_actions.delete)
      ? `Roll back and delete are not offered while the state is ${state.lock ? 'locked' : 'held by a run'}${
          me.allowed_actions.force_unlock ? ': force unlock it first, or wait for its holder' : ': wait for its holder to finish'
        }.`
      : null;
  const latest = state.latest_version;
  const hcl = backendHcl(location.origin, name, actor(me.actor));

  return (
    <>
      <p class="crumbs">
        <Link href="/">Terraform States</Link> /
      </p>
      <div class="title-row">
        <h1>{name}</h1>
        {state.opentofu_encrypted && <span class="badge encrypted">OpenTofu-encrypted</span>}
      </div>
      {imported && (
        <section class="notice" role="status">
          <p>Imported. Use it with this backend.hcl:</p>
          <Hcl text={hcl} label="backend.hcl of the imported state" />
        </section>
      )}
      {notice && (
        <p class="notice" role="status">
          {notice}
        </p>
      )}
      <ErrorText error={error} />
      <dl class="facts">
        <dt>Lineage</dt>
        <dd>
          <code>{state.lineage ?? 'none'}</code>
        </dd>
        <dt>Latest version</dt>
        {latest === null ? (
          <dd>none yet</dd>
        ) : (
          <dd>
            {latest} (serial {state.serial ?? 'none'}, {state.size === null ? 'size unknown' : bytes(state.size)})
          </dd>
        )}
        <dt>Last change</dt>
        <dd>{latest === null ? 'none yet' : <><Time at={state.updated_at} /> by {actor(state.updated_by)}</>}</dd>
      </dl>

      <section aria-labelledby="lock-title">
        <h2 id="lock-title">Lock</h2>
        {!held && <p>Unlocked.</p>}
        {state.lock && (
          <dl class="facts lock-detail">
            <dt>Holder</dt>
            <dd>
              <Holder lock={state.lock} />
            </dd>
            <dt>Lock ID</dt>
            <dd>
              <code>{state.lock.id}</code>
            </dd>
            <dt>Operation</dt>
            <dd>{state.lock.operation ?? ''}</dd>
            <dt>Who</dt>
            <dd>{state.lock.who ?? ''}</dd>
            <dt>Info</dt>
            <dd>{state.lock.info ?? ''}</dd>
            <dt>Created</dt>
            <dd>{state.lock.created ?? ''}</dd>
            <dt>Since</dt>
            <dd>
              <Time at={state.lock.since} /> ({exact(state.lock.since)})
            </dd>
            {state.lock.live_until && (
              <>
                <dt>Live until</dt>
                <dd>
                  <Time at={state.lock.live_until} /> ({exact(state.lock.live_until)})
                </dd>
              </>
            )}
          </dl>
        )}
        {state.hold && (
          <p>
            Held by <RunLink run={state.hold.run} url={state.hold.run_url} /> until its apply, since{' '}
            <Time at={state.hold.since} /> (hold ID <code>{state.hold.id}</code>).
          </p>
        )}
        {allowed.force_unlock && (
          <button type="button" class="danger" onClick={() => setDialog({ kind: 'unlock' })}>
            Force unlock
          </button>
        )}
        {blocked && <p class="reason">{blocked}</p>}
      </section>

      <section aria-labelledby="versions-title">
        <h2 id="versions-title">Versions</h2>
        {versions.length === 0 && (
          <p>No versions yet: {state.hold ? 'the holding run writes the first when it applies.' : 'nothing has been saved.'}</p>
        )}
        <SizeChart versions={versions} />
        <div class="scroll">
          <table class="versions">
            <thead>
              <tr>
                <th scope="col">Version</th>
                <th scope="col">Serial</th>
                <th scope="col">Terraform</th>
                <th scope="col">Instances</th>
                <th scope="col">Changes</th>
                <th scope="col">Size</th>
                <th scope="col">SHA-256</th>
                <th scope="col">Source</th>
                <th scope="col">Writer</th>
                <th scope="col">Created</th>
                <th scope="col">Key</th>
                <th scope="col">Change ended</th>
                <th scope="col">Saves</th>
                <th scope="col">Actions</th>
              </tr>
            </thead>
            <tbody>
              {versions.map((v) => (
                <tr key={v.version}>
                  <th scope="row">{v.version}</th>
                  <td>{v.serial ?? ''}</td>
                  <td>{v.terraform_version ?? <span class="muted">unknown</span>}</td>
                  <td>{v.instances ?? <span class="muted">unknown</span>}</td>
                  <td class="actions">
                    {counts[v.version] && (
                      <span class="counts" title={countsWords(counts[v.version])}>
                        <span aria-hidden="true">{countsText(counts[v.version])}</span>
                        <span class="visually-hidden">{countsWords(counts[v.version])}</span>
                      </span>
                    )}
                    {allowed.download && (
                      <button
                        type="button"
                        class="secondary small"
                        aria-label={`Changes in version ${v.version}`}
                        aria-pressed={changesOf === v.version}
                        onClick={() => showChanges(v.version)}
                      >
                        Changes
                      </button>
                    )}
                  </td>
                  <td class="nowrap">{bytes(v.size)}</td>
                  <td class="sha">
                    <code title={v.sha256}>{shortSha(v.sha256)}</code>
                    <CopyButton text={v.sha256} label={`Copy the SHA-256 of version ${v.version}`} />
                  </td>
                  <td>{v.source}</td>
                  <td>
                    {v.writer.kind === 'step' ? (
                      <span>
                        <RunLink run={v.writer.run} url={v.writer.run_url} /> · step {v.writer.step} · attempt{' '}
                        {v.writer.attempt}
                      </span>
                    ) : (
                      actor(v.writer)
                    )}
                  </td>
                  <td class="nowrap">
                    <Time at={v.created_at} />
                  </td>
                  <td>
                    <code class="key">{v.key}</code>
                  </td>
                  <td>
                    {ended(v.change.ended)}
                    {v.change.rolled_back_from ? ` (from version ${v.change.rolled_back_from})` : ''}
                  </td>
                  <td>{v.change.saves}</td>
                  <td class="actions">
                    {allowed.download && (
                      <button
                        type="button"
                        class="secondary small"
                        onClick={() => download(v)}
                        aria-label={`Download version ${v.version}`}
                      >
                        Download
                      </button>
                    )}
                    {allowed.rollback && v.version !== latest && !v.opentofu_encrypted && (
                      <button
                        type="button"
                        class="secondary small"
                        onClick={() => setDialog({ kind: 'rollback', version: v })}
                        aria-label={`Roll back to version ${v.version}`}
                      >
                        Roll back
                      </button>
                    )}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
        {!allowed.download && (
          <p class="reason">
            What changed between versions is not offered: it is read from the versions' content, which needs{' '}
            <code>tf_state:read</code> (as a download does), and your role ({me.role}) does not have it.
          </p>
        )}
      </section>

      {changesOf !== null && allowed.download && (
        <VersionChanges
          name={name}
          version={changesOf}
          since={since}
          versions={versions}
          onCompare={(other) => showChanges(changesOf, other)}
          onClose={() => showChanges(null)}
          onCounts={counted}
        />
      )}

      <section aria-labelledby="backend-title">
        <h2 id="backend-title">Use it</h2>
        <p>
          <code>backend.hcl</code> for this state (your token goes in <code>TF_HTTP_PASSWORD</code>):
        </p>
        <Hcl text={hcl} label="backend.hcl" />
      </section>

      {me.allowed_actions.audit && (
        <p>
          <Link href={`/audit?state=${encodeURIComponent(name)}`}>This state's audit log</Link>
        </p>
      )}

      {allowed.delete && (
        <section aria-labelledby="danger-title" class="danger-zone">
          <h2 id="danger-title">Delete</h2>
          <p>Deleting the state removes every version; its name can then be used again.</p>
          <button type="button" class="danger" onClick={() => setDialog({ kind: 'delete' })}>
            Delete state
          </button>
        </section>
      )}

      {dialog?.kind === 'rollback' && (
        <Confirm
          title={`Roll back ${name} to version ${dialog.version.version}?`}
          confirm="Roll back"
          busy={busy}
          error={dialogError}
          onConfirm={() => rollback(dialog.version)}
          onCancel={close}
        >
          <p>
            This makes a new version, {state.latest_version === null ? '' : `version ${state.latest_version + 1}, `}
            with the content of version {dialog.version.version} and a serial raised above the current one (
            {state.serial ?? 'none'}).
          </p>
          <p>Plans saved before the rollback will be refused as stale: plan again after it.</p>
        </Confirm>
      )}
      {dialog?.kind === 'unlock' && (
        <Confirm
          title={`Force unlock ${name}?`}
          confirm="Force unlock"
          danger
          busy={busy}
          error={dialogError}
          onConfirm={unlock}
          onCancel={close}
        >
          {state.lock && (
            <p>
              The lock is held by <Holder lock={state.lock} /> (lock ID <code>{state.lock.id}</code>
              {state.lock.who ? `, ${state.lock.who}` : ''}) since <Time at={state.lock.since} />. If it is still
              working, its next save is refused.
            </p>
          )}
          {state.hold && (
            <p>
              The state is held by <RunLink run={state.hold.run} url={state.hold.run_url} /> until its apply.
            </p>
          )}
          <p>
            This also ends a run's hold on the state: that run's apply then refuses its plan if the state changed in
            the meantime.
          </p>
        </Confirm>
      )}
      {dialog?.kind === 'delete' && (
        <Confirm
          title={`Delete ${name}?`}
          confirm="Delete state"
          danger
          busy={busy}
          error={dialogError}
          confirmable={typed === name}
          onConfirm={remove}
          onCancel={close}
        >
          <p>
            Every version of {name} goes ({versions.length} {versions.length === 1 ? 'version' : 'versions'}). This
            cannot be undone.
          </p>
          <label for="confirm-name">Type the state's name to confirm</label>
          <input
            id="confirm-name"
            value={typed}
            autoComplete="off"
            spellcheck={false}
            onInput={(e) => setTyped((e.target as HTMLInputElement).value)}
          />
        </Confirm>
      )}
    </>
  );
}
