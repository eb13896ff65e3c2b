// Artifacts → Octo apps: one row per app state (its lock, its newest archive, how many
// archives it has), a page at a time through the API's cursor, and what an app needs to
// start saving here when there are none yet.

import { appPath, archiveEnded } from '../archives';
import { ErrorText, Link, Time } from '../components';
import { actor, bytes } from '../format';
import { Pager, usePaged } from '../loading';
import type { AppList } from '../types';

/** App states per page. */
export const PAGE = 50;

export function AppsPage(props: { location: URL }) {
  const paged = usePaged<AppList>({ location: props.location, from: '/api/apps', here: '/apps', size: PAGE });
  const { value: list, error, cursor } = paged;

  return (
    <>
      <h1>Octo apps</h1>
      <ErrorText error={error} />
      {list && list.apps.length === 0 && !cursor && (
        <section class="empty">
          <h2>No Octo apps yet</h2>
          <p>
            An Octo app saves its state here through the TypeScript client in <code>clients/octo</code>: its first
            sealed change (<code>octo lock</code>, <code>octo apply</code>, <code>octo commit</code>) appears here, with
            the journal of every command that led to it.
          </p>
        </section>
      )}
      {list && list.apps.length > 0 && (
        <table class="apps">
          <caption class="visually-hidden">Octo apps of {list.org}</caption>
          <thead>
            <tr>
              <th scope="col">Name</th>
              <th scope="col">Newest archive</th>
              <th scope="col">Files</th>
              <th scope="col">Archives</th>
              <th scope="col">Lock</th>
            </tr>
          </thead>
          <tbody>
            {list.apps.map((a) => (
              <tr key={a.name}>
                <th scope="row">
                  <Link href={appPath(a.name)}>{a.name}</Link>
                </th>
                <td>
                  {a.newest ? (
                    <>
                      <code>{a.newest.commit_id}</code> <span class="muted">{archiveEnded(a.newest.ended)}</span>{' '}
                      <Time at={a.newest.sealed_at} />
                    </>
                  ) : (
                    <span class="muted">none sealed yet</span>
                  )}
                </td>
                <td class="nowrap">
                  {a.newest ? `${a.newest.files} ${a.newest.files === 1 ? 'file' : 'files'}, ${bytes(a.newest.size)}` : ''}
                </td>
                <td>{a.archives}</td>
                <td>
                  {a.lock ? (
                    <>
                      <span class="badge locked">Locked</span> by {actor(a.lock.holder)}, <Time at={a.lock.since} />
                    </>
                  ) : (
                    <span class="muted">unlocked</span>
                  )}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <Pager of={paged} label="Pages of apps" />
    </>
  );
}
