// The org at a glance, where signing in lands (`/`): how many states, versions and resource
// instances it has, its instances by provider and by type as bar charts (each bar's label
// searches for them), its largest states, every lock and hold with its age, the states no
// one has written for 90 days, the states the inventory does not hold, and how many objects
// two states manage, linked to the conflicts. One read of `GET /api/overview`.

import type { ComponentChildren } from 'preact';
import { api } from '../api';
import { BarChart } from '../chart';
import { Link } from '../components';
import { bytes, exact } from '../format';
import { age, locksAndHolds, resourcesHref } from '../inventory';
import { NotYet, useLoad } from '../loading';
import type { Overview } from '../types';

const stateHref = (name: string) => `/states/${encodeURIComponent(name)}`;

/** A table of states, each row headed by the state's name linked to its page, then `cells`. */
function StatesTable<T extends { state: string }>(props: {
  rows: T[];
  headings: string[];
  rowKey?: (row: T) => string;
  cells: (row: T) => ComponentChildren[];
}) {
  return (
    <table class="compact">
      <thead>
        <tr>
          <th scope="col">State</th>
          {props.headings.map((h) => (
            <th scope="col" key={h}>
              {h}
            </th>
          ))}
        </tr>
      </thead>
      <tbody>
        {props.rows.map((row) => (
          <tr key={props.rowKey ? props.rowKey(row) : row.state}>
            <th scope="row">
              <Link href={stateHref(row.state)}>{row.state}</Link>
            </th>
            {props.cells(row).map((cell, i) => (
              <td key={i}>{cell}</td>
            ))}
          </tr>
        ))}
      </tbody>
    </table>
  );
}

export function OverviewPage() {
  const loaded = useLoad(() => api<Overview>('GET', '/api/overview'), []);
  const o = loaded.value;
  if (!o) {
    return (
      <NotYet error={loaded.error}>
        <h1>Overview</h1>
      </NotYet>
    );
  }
  const held = locksAndHolds(o);
  return (
    <>
      <h1>Overview</h1>
      <dl class="stats">
        <div>
          <dt>States</dt>
          <dd>{o.states}</dd>
          <dd>
            <Link href="/states">All states</Link>
          </dd>
        </div>
        <div>
          <dt>Versions</dt>
          <dd>{o.versions}</dd>
        </div>
        <div>
          <dt>Resource instances</dt>
          <dd>{o.resources}</dd>
          <dd>
            <Link href="/resources">Search resources</Link>
          </dd>
        </div>
        <div class={o.conflicts > 0 ? 'alarm' : undefined}>
          <dt>Objects managed by two or more states</dt>
          <dd>{o.conflicts}</dd>
          <dd>
            <Link href="/resources/conflicts">See the conflicts</Link>
          </dd>
        </div>
      </dl>

      <section aria-labelledby="charts-title">
        <h2 id="charts-title">Resource instances</h2>
        {o.resources === 0 ? (
          <p>The inventory holds no resource instance yet: they appear here once a state with resources is written.</p>
        ) : (
          <div class="charts">
            <BarChart
              title="By provider (the 20 with most)"
              labelHeading="Provider"
              countHeading="Instances"
              bars={o.by_provider.map((p) => ({
                key: p.provider,
                count: p.count,
                label: <Link href={resourcesHref({ provider: p.provider })}>{p.provider}</Link>,
              }))}
            />
            <BarChart
              title="By type (the 20 with most)"
              labelHeading="Type"
              countHeading="Instances"
              bars={o.by_type.map((t) => ({
                key: t.type,
                count: t.count,
                label: <Link href={resourcesHref({ type: t.type })}>{t.type}</Link>,
              }))}
            />
          </div>
        )}
      </section>

      <section aria-labelledby="largest-title">
        <h2 id="largest-title">Largest states</h2>
        {o.largest.length === 0 ? (
          <p>No state has a version yet.</p>
        ) : (
          <StatesTable
            rows={o.largest}
            headings={["Latest version's size", 'Version']}
            cells={(s) => [bytes(s.size), s.version]}
          />
        )}
      </section>

      <section aria-labelledby="held-title">
        <h2 id="held-title">Locks and holds</h2>
        {held.length === 0 ? (
          <p>No state is locked or held.</p>
        ) : (
          <StatesTable
            rows={held}
            headings={['What', 'By', 'For']}
            rowKey={(h) => `${h.state} ${h.kind}`}
            cells={(h) => [
              <span class={`badge ${h.kind === 'lock' ? 'locked' : 'held'}`}>{h.kind === 'lock' ? 'Locked' : 'Held'}</span>,
              h.by,
              <time dateTime={h.since} title={`since ${exact(h.since)}`}>
                {age(h.age_seconds)}
              </time>,
            ]}
          />
        )}
      </section>

      <section aria-labelledby="stale-title">
        <h2 id="stale-title">Not written for 90 days</h2>
        {o.stale.length === 0 ? (
          <p>Every state was written in the last 90 days.</p>
        ) : (
          <StatesTable
            rows={o.stale}
            headings={['Last written']}
            cells={(s) => [
              <time dateTime={s.updated_at} title={exact(s.updated_at)}>
                {s.days} days ago
              </time>,
            ]}
          />
        )}
      </section>

      <section aria-labelledby="unindexed-title">
        <h2 id="unindexed-title">Not in the inventory</h2>
        {o.not_indexed.length === 0 ? (
          <p>The inventory holds every state's latest version.</p>
        ) : (
          <>
            <p>
              Searches and conflicts do not see these states' resources: OpenTofu encrypts them, their format is not
              Terraform's version 4, or they were written before the inventory was built (an operator runs{' '}
              <code>hegemony-state index rebuild</code>).
            </p>
            <StatesTable rows={o.not_indexed} headings={['Latest version']} cells={(s) => [s.version]} />
          </>
        )}
      </section>
    </>
  );
}
