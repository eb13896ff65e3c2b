// Artifacts → Terraform States: one row per state, a page at a time through the API's
// cursor, filtered by the start of the name on the server (so an org with thousands of
// states stays quick), and what to paste when there are none yet.

import { useEffect, useState } from 'preact/hooks';

import { backendHcl } from '../backend';
import { ErrorText, Hcl, Link, LockSummary, Time } from '../components';
import { actor, bytes } from '../format';
import { Pager, usePaged } from '../loading';
import { navigate } from '../router';
import { changedOnlyBy, protectionText } from '../trust';
import type { Identity, StateList } from '../types';

/** States per page. */
export const PAGE = 50;

export function StatesPage(props: { me: Identity; location: URL }) {
  const query = props.location.searchParams;
  const prefix = query.get('prefix') ?? '';
  const [filter, setFilter] = useState(prefix);
  const paged = usePaged<StateList>({ location: props.location, from: '/api/tf-states', here: '/states', size: PAGE, filters: { prefix } });
  const { value: list, error, cursor } = paged;

  // Filtering as one types, a moment after the last key, from the first page.
  useEffect(() => {
    if (filter === prefix) return;
    const timer = setTimeout(() => {
      const next = new URLSearchParams();
      if (filter) next.set('prefix', filter);
      navigate(`/states?${next}`, true);
    }, 250);
    return () => clearTimeout(timer);
  }, [filter]);

  return (
    <>
      <div class="title-row">
        <h1>Terraform States</h1>
        {props.me.allowed_actions.import && (
          <Link href="/import" class="button">
            Import state
          </Link>
        )}
      </div>
      <div class="filter">
        <label for="filter">Filter by name (starts with)</label>
        <input
          id="filter"
          type="search"
          value={filter}
          onInput={(e) => setFilter((e.target as HTMLInputElement).value)}
        />
      </div>
      <ErrorText error={error} />
      {list && list.states.length === 0 && !cursor && (
        <Empty filtered={prefix !== ''} user={actor(props.me.actor)} />
      )}
      {list && list.states.length > 0 && (
        <table class="states">
          <caption class="visually-hidden">States of {list.org}</caption>
          <thead>
            <tr>
              <th scope="col">Name</th>
              <th scope="col">Version</th>
              <th scope="col">Serial</th>
              <th scope="col">Size</th>
              <th scope="col">Last change</th>
              <th scope="col">Lock</th>
            </tr>
          </thead>
          <tbody>
            {list.states.map((s) => (
              <tr key={s.name}>
                <th scope="row">
                  <Link href={`/states/${encodeURIComponent(s.name)}`}>{s.name}</Link>
                  {s.opentofu_encrypted && <span class="badge encrypted">OpenTofu-encrypted</span>}
                  {s.protections.length > 0 && (
                    <span class="badge protected" title={protectionText(s.protections) ?? undefined}>
                      Protected: {changedOnlyBy(s.protections).join(', ') || 'no CI job'}
                    </span>
                  )}
                </th>
                <td>{s.latest_version ?? <span class="muted">none yet</span>}</td>
                <td>{s.serial ?? ''}</td>
                <td>{s.size === null ? '' : bytes(s.size)}</td>
                <td>
                  <Time at={s.updated_at} />
                  {s.updated_by && <span class="muted"> by {actor(s.updated_by)}</span>}
                </td>
                <td>
                  <LockSummary lock={s.lock} hold={s.hold} />
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <Pager of={paged} label="Pages of states" />
    </>
  );
}

function Empty(props: { filtered: boolean; user: string }) {
  if (props.filtered) return <p>No state's name starts with that.</p>;
  return (
    <section class="empty">
      <h2>No states yet</h2>
      <p>
        Point Terraform or OpenTofu at this server: save this as <code>backend.hcl</code>, with{' '}
        <code>{'terraform { backend "http" {} }'}</code> in your configuration, then run{' '}
        <code>terraform init -backend-config=backend.hcl</code> with your token in <code>TF_HTTP_PASSWORD</code>.
      </p>
      <Hcl text={backendHcl(location.origin, 'example', props.user)} label="backend.hcl" />
    </section>
  );
}
