// The audit log (admins): the org's, or one state's, newest first, a page at a time,
// filtered by action.

import { ErrorText, Link, Time } from '../components';
import { actor } from '../format';
import { Pager, usePaged } from '../loading';
import { navigate } from '../router';
import type { AuditPage as Page, Identity } from '../types';

/** The actions the log records (AuditEntry.action in the API description). */
export const ACTIONS = [
  'version.created',
  'state.imported',
  'state.rolled_back',
  'lock.force_unlocked',
  'lock.expired',
  'state.deleted',
  'state.restored',
  'state.purged',
  'version.downloaded',
  'permissions.changed',
  'token.created',
  'token.revoked',
  'step_token.minted',
];

const PAGE = 50;

export function AuditPage(props: { me: Identity; location: URL }) {
  const q = props.location.searchParams;
  const state = q.get('state') ?? '';
  const action = q.get('action') ?? '';
  const paged = usePaged<Page>({
    location: props.location,
    from: '/api/audit',
    here: '/audit',
    size: PAGE,
    filters: { state, action },
    enabled: props.me.allowed_actions.audit,
  });
  const { value: page, error } = paged;

  if (!props.me.allowed_actions.audit) {
    return (
      <>
        <h1>Audit log</h1>
        <p class="reason">The audit log needs the admin role; yours is {props.me.role}.</p>
      </>
    );
  }
  const link = (changes: Record<string, string | null>) => {
    const params = new URLSearchParams();
    const merged = { state, action, ...changes };
    for (const [k, v] of Object.entries(merged)) if (v) params.set(k, v);
    return `/audit?${params}`;
  };

  return (
    <>
      <h1>{state ? `Audit log of ${state}` : 'Audit log'}</h1>
      {state && (
        <p>
          <Link href={`/states/${encodeURIComponent(state)}`}>Back to {state}</Link> ·{' '}
          <Link href={link({ state: null, cursor: null })}>The whole organization's log</Link>
        </p>
      )}
      <div class="filter">
        <label for="action">Action</label>
        <select
          id="action"
          value={action}
          onChange={(e) => navigate(link({ action: (e.target as HTMLSelectElement).value, cursor: null }))}
        >
          <option value="">every action</option>
          {ACTIONS.map((a) => (
            <option value={a}>{a}</option>
          ))}
        </select>
      </div>
      <ErrorText error={error} />
      {page && page.entries.length === 0 && <p>No entries.</p>}
      {page && page.entries.length > 0 && (
        <table class="audit">
          <thead>
            <tr>
              <th scope="col">When</th>
              <th scope="col">Action</th>
              <th scope="col">By</th>
              <th scope="col">State</th>
              <th scope="col">Version</th>
              <th scope="col">Detail</th>
            </tr>
          </thead>
          <tbody>
            {page.entries.map((e) => (
              <tr>
                <td>
                  <Time at={e.at} />
                </td>
                <td>
                  <code>{e.action}</code>
                </td>
                <td>{actor(e.actor)}</td>
                <td>{e.state ?? ''}</td>
                <td>{e.version ?? ''}</td>
                <td>
                  <code class="detail">{e.detail === undefined || e.detail === null ? '' : JSON.stringify(e.detail)}</code>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <Pager of={paged} label="Pages of the log" previous="Newer entries" next="Older entries" />
    </>
  );
}
