// A state's versions section: the size chart, one row per version (newest first) with its
// facts, the `+a ~c -r` of its changes once they were opened, and its actions (what changed,
// download, roll back) as the role allows; the rollback's confirmation; and why what changed
// is not offered to a role that may not read content.

import { SizeChart } from '../../chart';
import { countsText, countsWords } from '../../comparison';
import { Confirm, CopyButton, RunLink, Time } from '../../components';
import { actor, bytes, ended, shortSha } from '../../format';
import type { ChangeCounts, Identity, StateView, Version } from '../../types';
import type { Confirmation } from './actions';

export function VersionsSection(props: {
  me: Identity;
  state: StateView;
  versions: Version[];
  /** The counts of each version whose changes were opened. */
  counts: Record<number, ChangeCounts>;
  /** The version whose changes are open, if any. */
  changesOf: number | null;
  onChanges: (version: number) => void;
  onDownload: (v: Version) => void;
  onRollback: (v: Version) => void;
}) {
  const { state, versions } = props;
  const allowed = state.allowed_actions;
  return (
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
              <th scope="col">Written</th>
              <th scope="col">Key</th>
              <th scope="col">Change</th>
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
                  {props.counts[v.version] && (
                    <span class="counts" title={countsWords(props.counts[v.version])}>
                      <span aria-hidden="true">{countsText(props.counts[v.version])}</span>
                      <span class="visually-hidden">{countsWords(props.counts[v.version])}</span>
                    </span>
                  )}
                  {allowed.download && (
                    <button
                      type="button"
                      class="secondary small"
                      aria-label={`Changes in version ${v.version}`}
                      aria-pressed={props.changesOf === v.version}
                      onClick={() => props.onChanges(v.version)}
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
                <td class="written">
                  {v.writer.kind === 'step' ? (
                    <span>
                      <RunLink run={v.writer.run} url={v.writer.run_url} /> · step {v.writer.step} · attempt{' '}
                      {v.writer.attempt}
                    </span>
                  ) : (
                    actor(v.writer)
                  )}
                  <div class="muted">
                    <Time at={v.created_at} />
                  </div>
                </td>
                <td>
                  <code class="key">{keyParts(v.key)}</code>
                </td>
                <td>
                  {ended(v.change.ended)}
                  {v.change.rolled_back_from ? ` (from version ${v.change.rolled_back_from})` : ''}
                  <div class="muted">
                    {v.source} · {v.change.saves} {v.change.saves === 1 ? 'save' : 'saves'}
                  </div>
                </td>
                <td class="actions">
                  {allowed.download && (
                    <button
                      type="button"
                      class="secondary small"
                      onClick={() => props.onDownload(v)}
                      aria-label={`Download version ${v.version}`}
                    >
                      Download
                    </button>
                  )}
                  {allowed.rollback && v.version !== state.latest_version && !v.opentofu_encrypted && (
                    <button
                      type="button"
                      class="secondary small"
                      onClick={() => props.onRollback(v)}
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
          <code>tf_state:read</code> (as a download does), and your role ({props.me.role}) does not have it.
        </p>
      )}
    </section>
  );
}

/** A key id with a line break allowed after each `:` and `/`, where its parts end. */
function keyParts(key: string) {
  return key.split(/(?<=[:/])/).flatMap((part, i) => (i === 0 ? [part] : [<wbr />, part]));
}

/** The rollback confirmation: the version it makes, and that plans from before it go stale. */
export function RollbackDialog(props: {
  name: string;
  state: StateView;
  version: Version;
} & Confirmation) {
  const { state, version } = props;
  return (
    <Confirm
      title={`Roll back ${props.name} to version ${version.version}?`}
      confirm="Roll back"
      busy={props.busy}
      error={props.error}
      onConfirm={props.onConfirm}
      onCancel={props.onCancel}
    >
      <p>
        This makes a new version, {state.latest_version === null ? '' : `version ${state.latest_version + 1}, `}
        with the content of version {version.version} and a serial raised above the current one (
        {state.serial ?? 'none'}).
      </p>
      <p>Plans saved before the rollback will be refused as stale: plan again after it.</p>
    </Confirm>
  );
}
