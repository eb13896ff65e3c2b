// Resources → conflicts (`/resources/conflicts`): each object two or more states manage
// (instances whose identities are equal; the identities themselves are compared as keyed
// digests on the server and never shown), with the address it has in each state and that
// state's link. One read of `GET /api/resources/conflicts`.

import { api } from '../api';
import { Link } from '../components';
import { inWords, statesOf } from '../inventory';
import { NotYet, useLoad } from '../loading';
import type { ConflictList } from '../types';

export function ConflictsPage() {
  const loaded = useLoad(() => api<ConflictList>('GET', '/api/resources/conflicts'), []);
  const heading = <h1>Objects managed by two or more states</h1>;
  if (!loaded.value) {
    return (
      <NotYet error={loaded.error} after={<Link href="/resources">Back to Resources</Link>}>
        {heading}
      </NotYet>
    );
  }
  const { conflicts } = loaded.value;
  return (
    <>
      <p class="crumbs">
        <Link href="/resources">Resources</Link> /
      </p>
      {heading}
      <p class="explain">
        Each group is one object that more than one state manages: an apply of either state changes it, and a destroy of
        either removes it from under the other. Keep it in one state (<code>terraform state rm</code> it from the others),
        or import a separate object where two were meant.
      </p>
      {conflicts.length === 0 ? (
        <p role="status">No object is managed by two states.</p>
      ) : (
        <>
          <p role="status">
            {conflicts.length} object{conflicts.length === 1 ? ' is' : 's are'} managed by two or more states.
          </p>
          <ol class="conflicts">
            {conflicts.map((c, i) => (
              <li key={i}>
                <h2>
                  A <code>{c.type}</code> in {inWords(statesOf(c))}
                </h2>
                <table class="compact">
                  <thead>
                    <tr>
                      <th scope="col">State</th>
                      <th scope="col">Address</th>
                      <th scope="col">Version</th>
                    </tr>
                  </thead>
                  <tbody>
                    {c.instances.map((r) => (
                      <tr key={`${r.state}\n${r.address}`}>
                        <th scope="row">
                          <Link href={`/states/${encodeURIComponent(r.state)}`}>{r.state}</Link>
                        </th>
                        <td>
                          <code>{r.address}</code>
                        </td>
                        <td>{r.version}</td>
                      </tr>
                    ))}
                  </tbody>
                </table>
              </li>
            ))}
          </ol>
        </>
      )}
    </>
  );
}
