// One Octo app: the lock of a change under way, and its archives, newest first (commit ID,
// how the change ended, who, when, its files with their sizes), a page at a time; each
// archive links to its own page.

import { api, seg } from '../api';
import { appPath, archiveEnded, splitFiles } from '../archives';
import { Link, Time } from '../components';
import { actor, bytes, exact } from '../format';
import { NotYet, Pager, useLoad, usePaged } from '../loading';
import type { AppArchive, AppView, ArchiveList } from '../types';

/** Archives per page. */
export const PAGE = 20;

export function AppStatePage(props: { name: string; location: URL }) {
  const { name } = props;
  // The app's lock is read again with every page of archives, so paging shows it as it is.
  const paged = usePaged<ArchiveList>({ location: props.location, from: `/api/apps/${seg(name)}/archives`, here: appPath(name), size: PAGE });
  const view = useLoad(() => api<AppView>('GET', `/api/apps/${seg(name)}`), [name, paged.cursor]);
  const { value: app } = view;
  const { value: list, cursor } = paged;

  const crumbs = (
    <p class="crumbs">
      <Link href="/apps">Octo apps</Link> /
    </p>
  );
  if (!app || !list) {
    return (
      <NotYet error={view.error ?? paged.error}>
        {crumbs}
        <h1>{name}</h1>
      </NotYet>
    );
  }

  return (
    <>
      {crumbs}
      <h1>{name}</h1>
      <section aria-labelledby="lock-title">
        <h2 id="lock-title">Lock</h2>
        {!app.lock && <p>Unlocked: no change is under way.</p>}
        {app.lock && (
          <dl class="facts lock-detail">
            <dt>Holder</dt>
            <dd>{actor(app.lock.holder)}</dd>
            <dt>Change</dt>
            <dd>
              <code>{app.lock.commit_id}</code> (what it uploads is sealed when its holder commits or unlocks)
            </dd>
            <dt>Who</dt>
            <dd>{app.lock.who}</dd>
            <dt>Info</dt>
            <dd>{app.lock.info}</dd>
            <dt>Since</dt>
            <dd>
              <Time at={app.lock.since} /> ({exact(app.lock.since)})
            </dd>
          </dl>
        )}
      </section>
      <section aria-labelledby="archives-title">
        <h2 id="archives-title">Archives</h2>
        <p class="muted">
          Newest first. The newest is the sealed state: what an app that reads this one reads.
        </p>
        {list.archives.length === 0 && <p>None sealed yet.</p>}
        {list.archives.length > 0 && (
          <div class="scroll">
            <table class="archives">
              <thead>
                <tr>
                  <th scope="col">Commit ID</th>
                  <th scope="col">Ended</th>
                  <th scope="col">Who</th>
                  <th scope="col">When</th>
                  <th scope="col">Files</th>
                </tr>
              </thead>
              <tbody>
                {list.archives.map((a, i) => (
                  <ArchiveRow key={a.commit_id} app={name} archive={a} newest={i === 0 && !cursor} />
                ))}
              </tbody>
            </table>
          </div>
        )}
        <Pager of={paged} label="Pages of archives" />
      </section>
    </>
  );
}

function ArchiveRow(props: { app: string; archive: AppArchive; newest: boolean }) {
  const a = props.archive;
  const { state, journal } = splitFiles(a.files);
  const journalFiles = journal.flatMap((g) => g.files);
  const journalSize = journalFiles.reduce((n, f) => n + f.size, 0);
  return (
    <tr>
      <th scope="row">
        <Link href={appPath(props.app, a.commit_id)}>
          <code>{a.commit_id}</code>
        </Link>
        {props.newest && <span class="badge sealed">Newest</span>}
      </th>
      <td>{archiveEnded(a.ended)}</td>
      <td>
        {actor(a.holder)}
        {a.who && <div class="muted">{a.who}</div>}
      </td>
      <td class="nowrap">
        <Time at={a.sealed_at} />
      </td>
      <td>
        <ul class="files">
          {state.map((f) => (
            <li key={f.name}>
              <code>{f.name}</code> <span class="muted">{bytes(f.size)}</span>
            </li>
          ))}
          <li>
            journal: {journalFiles.length} {journalFiles.length === 1 ? 'file' : 'files'} of{' '}
            {journal.map((g) => g.command).join(', ') || 'no command'} <span class="muted">{bytes(journalSize)}</span>
          </li>
        </ul>
        <span class="muted">
          {a.files.length} {a.files.length === 1 ? 'file' : 'files'}, {bytes(a.size)}
        </span>
      </td>
    </tr>
  );
}
