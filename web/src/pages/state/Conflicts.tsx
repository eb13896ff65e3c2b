// A warning on a state's page when another state manages some of the same objects (their
// identities are equal in the inventory): which of this state's addresses each other state
// manages too, under which address there, linked to it. Read from
// `GET /api/resources/conflicts?state=NAME` again whenever the state's latest version
// changes. Nothing is shown when there is no conflict, nor when the read fails: the warning
// adds to the page, and an inventory that cannot answer (a 503, an index being rebuilt)
// must not put an error on a state that is otherwise shown whole. A 401 still signs out, as
// every call does.

import { api, seg } from '../../api';
import { Link } from '../../components';
import { sharedWith } from '../../inventory';
import { useLoad } from '../../loading';
import type { ConflictList } from '../../types';

export function ConflictWarning(props: { name: string; version: number | null }) {
  const { name, version } = props;
  const loaded = useLoad(() => api<ConflictList>('GET', `/api/resources/conflicts?state=${seg(name)}`), [name, version]);
  if (!loaded.value || loaded.error) return null;
  const shared = sharedWith(loaded.value.conflicts, name);
  if (shared.length === 0) return null;
  const count = shared.reduce((n, s) => n + s.objects.length, 0);
  return (
    <section class="warning conflict" aria-labelledby="conflict-title">
      <h2 id="conflict-title">Managed by another state too</h2>
      <p>
        {count === 1 ? 'An object' : `${count} objects`} this state manages {count === 1 ? 'is' : 'are'} managed by{' '}
        {shared.length === 1 ? 'another state' : `${shared.length} other states`} as well: an apply of either changes{' '}
        {count === 1 ? 'it' : 'them'}. Keep each in one state. <Link href="/resources/conflicts">All conflicts</Link>
      </p>
      <ul>
        {shared.map((s) => (
          <li key={s.state}>
            Also in <Link href={`/states/${seg(s.state)}`}>{s.state}</Link>:{' '}
            <ul class="pairs">
              {s.objects.map((o) => (
                <li key={`${o.here}\n${o.there}`}>
                  <code>{o.here}</code>
                  {o.there !== o.here && (
                    <>
                      {' '}
                      (there <code>{o.there}</code>)
                    </>
                  )}
                </li>
              ))}
            </ul>
          </li>
        ))}
      </ul>
    </section>
  );
}
