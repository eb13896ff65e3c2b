// One archive of an Octo app: how its change ended and who made it, its state files (Octo's
// records and each module's Terraform state) and its journal, file by file with the command
// each came from, in the order the commands ran. Downloads are offered when the role may
// read content (`allowed_actions.download`); each one is audited by the server.

import { useState } from 'preact/hooks';

import { api, fetchContent, seg } from '../api';
import { appPath, archiveEnded, commandStarted, journalHolds, splitFiles } from '../archives';
import { ErrorText, Link, save, Time } from '../components';
import { actor, bytes, exact, shortSha } from '../format';
import { NotYet, useLoad } from '../loading';
import type { AppArchive, AppFile, AppView, Identity } from '../types';

export function ArchivePage(props: { me: Identity; name: string; commitId: string }) {
  const { name, commitId } = props;
  const path = `/api/apps/${seg(name)}`;
  const loaded = useLoad(
    () => Promise.all([api<AppView>('GET', path), api<AppArchive>('GET', `${path}/archives/${seg(commitId)}`)]),
    [name, commitId],
  );
  // A download's failure, shown under the title.
  const [failed, setFailed] = useState<string | null>(null);
  const error = loaded.error ?? failed;

  const download = async (f: AppFile) => {
    try {
      save(await fetchContent(`${path}/archives/${seg(commitId)}/files/${seg(f.name)}`), f.name);
    } catch (e) {
      setFailed((e as Error).message);
    }
  };

  const crumbs = (
    <p class="crumbs">
      <Link href="/apps">Octo apps</Link> / <Link href={appPath(name)}>{name}</Link> /
    </p>
  );
  if (!loaded.value) {
    return (
      <NotYet error={loaded.error}>
        {crumbs}
        <h1>{commitId}</h1>
      </NotYet>
    );
  }
  const [app, archive] = loaded.value;

  const allowed = app.allowed_actions.download;
  const { state, journal } = splitFiles(archive.files);
  const downloadButton = (f: AppFile) =>
    allowed && (
      <button type="button" class="secondary small" onClick={() => download(f)} aria-label={`Download ${f.name}`}>
        Download
      </button>
    );

  return (
    <>
      {crumbs}
      <div class="title-row">
        <h1>
          Archive <code>{archive.commit_id}</code>
        </h1>
        {app.newest?.commit_id === archive.commit_id && <span class="badge sealed">Newest: the sealed state</span>}
      </div>
      <ErrorText error={error} />
      <dl class="facts">
        <dt>Ended</dt>
        <dd>{archiveEnded(archive.ended)}</dd>
        <dt>Holder</dt>
        <dd>
          {actor(archive.holder)}
          {archive.who ? ` (${archive.who})` : ''}
          {archive.info ? ` · ${archive.info}` : ''}
        </dd>
        <dt>Locked</dt>
        <dd>
          <Time at={archive.locked_at} /> ({exact(archive.locked_at)})
        </dd>
        <dt>Sealed</dt>
        <dd>
          <Time at={archive.sealed_at} /> ({exact(archive.sealed_at)}) by {actor(archive.sealed_by)}
        </dd>
        <dt>Size</dt>
        <dd>
          {archive.files.length} files, {bytes(archive.size)}
        </dd>
      </dl>

      <section aria-labelledby="state-title">
        <h2 id="state-title">State files</h2>
        <div class="scroll">
          <table class="app-files">
            <thead>
              <tr>
                <th scope="col">File</th>
                <th scope="col">Serial</th>
                <th scope="col">Size</th>
                <th scope="col">SHA-256</th>
                <th scope="col">Uploaded in</th>
                <th scope="col">Actions</th>
              </tr>
            </thead>
            <tbody>
              {state.map((f) => (
                <tr key={f.name}>
                  <th scope="row">
                    <code>{f.name}</code>
                  </th>
                  <td>{f.serial ?? ''}</td>
                  <td class="nowrap">{bytes(f.size)}</td>
                  <td class="sha">
                    <code title={f.sha256}>{shortSha(f.sha256)}</code>
                  </td>
                  <td class="nowrap">
                    {f.uploaded_in === archive.commit_id ? (
                      'this change'
                    ) : (
                      <Link href={appPath(name, f.uploaded_in)}>
                        <code>{f.uploaded_in}</code>
                      </Link>
                    )}
                  </td>
                  <td class="actions">{downloadButton(f)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      </section>

      <section aria-labelledby="journal-title">
        <h2 id="journal-title">Journal</h2>
        {journal.length === 0 && <p>This change holds no journal file.</p>}
        {journal.length > 0 && (
          <div class="scroll">
            <table class="journal">
              <thead>
                <tr>
                  <th scope="col">Command</th>
                  <th scope="col">File</th>
                  <th scope="col">Holds</th>
                  <th scope="col">Size</th>
                  <th scope="col">Actions</th>
                </tr>
              </thead>
              <tbody>
                {journal.flatMap((g) =>
                  g.files.map((f, i) => (
                    <tr key={f.name} class={i === 0 ? 'first' : undefined}>
                      {i === 0 && (
                        <th scope="rowgroup" rowSpan={g.files.length}>
                          {g.command}
                          <div class="muted">
                            <Time at={commandStarted(g.id)} />
                          </div>
                        </th>
                      )}
                      <td>
                        <code>{f.name}</code>
                      </td>
                      <td>{journalHolds(f)}</td>
                      <td class="nowrap">{bytes(f.size)}</td>
                      <td class="actions">{downloadButton(f)}</td>
                    </tr>
                  )),
                )}
              </tbody>
            </table>
          </div>
        )}
      </section>
      {!allowed && (
        <p class="reason">
          Downloads are not offered: a file's content needs <code>tf_state:read</code>, and your role (
          {props.me.role}) does not have it. The journal holds each module's inputs as given, secrets included.
        </p>
      )}
    </>
  );
}
