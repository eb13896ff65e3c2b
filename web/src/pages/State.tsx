// A state's page: lineage, objects another state manages too, the lock or hold in full (a run's hold too before the state's
// first version, so the 423 everyone else gets has a visible cause), the versions with their
// size over time, its outputs and the terraform_remote_state block that reads them, backend.hcl,
// and the actions `allowed_actions` allows: download, what changed in a
// version (`?changes=N&since=M` in the address), roll back, force unlock, delete. Each
// destructive action is confirmed first; an action the role allows but the state's
// condition does not is replaced by the reason.
//
// This file reads the state and lays out its sections, one file each in `state/`: the
// summary, a warning when other states manage the same objects, the lock, the versions, the
// outputs, the delete section, and the actions they call.

import { useEffect, useState } from 'preact/hooks';

import { api, seg } from '../api';
import { backendHcl } from '../backend';
import { versionParam } from '../comparison';
import { Hcl, Link } from '../components';
import { actor } from '../format';
import { NotYet, useLoad } from '../loading';
import { navigate } from '../router';
import type { ChangeCounts, Identity, StateView, Version } from '../types';
import { VersionComparison } from '../versionComparison';
import { useStateActions } from './state/actions';
import { ConflictWarning } from './state/Conflicts';
import { DeleteDialog, DeleteSection } from './state/Delete';
import { LockSection, UnlockDialog } from './state/Lock';
import { OutputsSection } from './state/Outputs';
import { Summary } from './state/Summary';
import { RollbackDialog, VersionsSection } from './state/Versions';

export function StatePage(props: { me: Identity; name: string; location: URL }) {
  const { me, name } = props;
  const imported = props.location.searchParams.get('imported') === '1';
  const changesOf = versionParam(props.location.searchParams.get('changes'));
  const since = versionParam(props.location.searchParams.get('since'));
  const path = `/api/tf-states/${seg(name)}`;
  const loaded = useLoad(
    () => Promise.all([api<StateView>('GET', path), api<{ versions: Version[] }>('GET', `${path}/versions`)]),
    [name],
  );
  const actions = useStateActions(name, loaded.value?.[0] ?? null, loaded.reload);
  // The `+a ~c -r` of each version whose changes (since the version before) were opened:
  // versions never change, so what was counted once stays true while the page is open.
  const [counts, setCounts] = useState<Record<number, ChangeCounts>>({});
  useEffect(() => setCounts({}), [name]);

  if (!loaded.value) {
    return (
      <NotYet error={loaded.error} after={<Link href="/states">Back to Terraform States</Link>}>
        <h1>{name}</h1>
      </NotYet>
    );
  }
  const [state, { versions }] = loaded.value;
  const here = `/states/${seg(name)}`;
  const showChanges = (version: number | null, other: number | null = null) =>
    navigate(version === null ? here : `${here}?changes=${version}${other === null ? '' : `&since=${other}`}`);
  const hcl = backendHcl(location.origin, name, actor(me.actor));
  const { dialog } = actions;

  return (
    <>
      <Summary
        name={name}
        state={state}
        imported={imported ? hcl : null}
        notice={actions.notice}
        error={loaded.error ?? actions.failed}
      />
      <ConflictWarning name={name} version={state.latest_version} />
      <LockSection me={me} state={state} onForceUnlock={() => actions.open({ kind: 'unlock' })} />
      <VersionsSection
        me={me}
        state={state}
        versions={versions}
        counts={counts}
        changesOf={changesOf}
        onChanges={(version) => showChanges(version)}
        onDownload={actions.download}
        onRollback={(version) => actions.open({ kind: 'rollback', version })}
      />

      {changesOf !== null && state.allowed_actions.download && (
        <VersionComparison
          name={name}
          version={changesOf}
          since={since}
          versions={versions}
          onCompare={(other) => showChanges(changesOf, other)}
          onClose={() => showChanges(null)}
          onCounts={(version, c) => setCounts((known) => ({ ...known, [version]: c }))}
        />
      )}

      {state.allowed_actions.outputs && <OutputsSection name={name} state={state} user={actor(me.actor)} />}

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

      {state.allowed_actions.delete && <DeleteSection onDelete={() => actions.open({ kind: 'delete' })} />}

      {dialog?.kind === 'rollback' && (
        <RollbackDialog
          name={name}
          state={state}
          version={dialog.version}
          {...actions.confirm(() => actions.rollback(dialog.version))}
        />
      )}
      {dialog?.kind === 'unlock' && (
        <UnlockDialog
          name={name}
          state={state}
          {...actions.confirm(actions.unlock)}
        />
      )}
      {dialog?.kind === 'delete' && (
        <DeleteDialog
          name={name}
          versions={versions.length}
          {...actions.confirm(actions.remove)}
        />
      )}
    </>
  );
}
