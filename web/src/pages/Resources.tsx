// Artifacts → Resources: every resource instance of the org's states (their latest
// versions), searched by a part of the address as one types and filtered by type, provider,
// module and state, a page at a time ("More results" reads the next through the API's
// cursor). The search is the page's address (`/resources?q=&type=&...`), so it can be linked
// and back and forward walk the searches run: each search run adds an entry to the history,
// one per pause in typing (not one per key), or at once on Enter or the Search button. Rows
// show addresses, types and providers, never a value: the API has none to give.

import { useEffect, useRef, useState } from 'preact/hooks';

import { api } from '../api';
import { ErrorText, Link } from '../components';
import { FILTERS, filtersOf, ResourceFilters, resourcesHref, searchQuery } from '../inventory';
import { navigate } from '../router';
import type { Resource, ResourceList } from '../types';

/** Instances per page. */
const PAGE = 50;
/** How long typing pauses before the search is run: one request per word, not per key. */
const DEBOUNCE_MS = 250;

/** The rows shown and the cursor of the page after them. */
interface Found {
  rows: Resource[];
  next: string | null;
}

/** The filters that match exactly, under the search, with an example of each. */
const EXACT: Exclude<keyof ResourceFilters, 'q'>[] = ['type', 'provider', 'module', 'state'];
const LABELS: Record<(typeof EXACT)[number], { label: string; hint: string }> = {
  type: { label: 'Type', hint: 'aws_s3_bucket' },
  provider: { label: 'Provider', hint: 'aws or hashicorp/aws' },
  module: { label: 'Module', hint: 'module.network' },
  state: { label: 'State', hint: 'its name' },
};

export function ResourcesPage(props: { location: URL }) {
  const asked = filtersOf(props.location.searchParams);
  const key = searchQuery(asked);
  const [typed, setTyped] = useState<ResourceFilters>(asked);
  const [found, setFound] = useState<Found | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [loading, setLoading] = useState(false);
  // The read under way: a newer search aborts it, so a slow answer to an old search is
  // neither waited for nor shown over the new one.
  const inFlight = useRef<AbortController | null>(null);
  // After "More results", the index of the first new row, whose link then takes the focus.
  const focusFrom = useRef<number | null>(null);
  const table = useRef<HTMLTableSectionElement>(null);

  // The address changed by itself (back, forward, a link): the fields follow it. Not when it
  // is what the fields already ask (trimmed), so a space being typed is not taken away.
  useEffect(() => {
    setTyped((now) => (searchQuery(now) === key ? now : filtersOf(props.location.searchParams)));
  }, [key]);

  // Typing: the address (and with it the search) follows a moment after the last key.
  useEffect(() => {
    if (searchQuery(typed) === key) return;
    const timer = setTimeout(() => navigate(resourcesHref(typed)), DEBOUNCE_MS);
    return () => clearTimeout(timer);
  }, [typed, key]);

  const read = async (cursor: string | null) => {
    inFlight.current?.abort();
    const mine = new AbortController();
    inFlight.current = mine;
    setLoading(true);
    try {
      const page = await api<ResourceList>(
        'GET',
        `/api/resources?${searchQuery(asked, { limit: String(PAGE), cursor })}`,
        undefined,
        mine.signal,
      );
      setFound((before) => ({
        rows: cursor !== null && before ? [...before.rows, ...page.resources] : page.resources,
        next: page.next_cursor,
      }));
      setError(null);
    } catch (e) {
      if (mine.signal.aborted) return;
      // A first page refused leaves no rows of an earlier search under the error.
      if (cursor === null) setFound(null);
      setError((e as Error).message);
    } finally {
      if (inFlight.current === mine) {
        inFlight.current = null;
        setLoading(false);
      }
    }
  };

  useEffect(() => {
    focusFrom.current = null;
    read(null);
    return () => inFlight.current?.abort();
  }, [key]);

  useEffect(() => {
    const from = focusFrom.current;
    if (from === null || !table.current) return;
    focusFrom.current = null;
    table.current.querySelectorAll<HTMLAnchorElement>('tr a')[from]?.focus();
  }, [found]);

  // Enter runs the search at once (the pending pause's timer goes with the address change).
  const submit = (e: Event) => {
    e.preventDefault();
    if (searchQuery(typed) !== key) navigate(resourcesHref(typed));
  };
  const more = () => {
    if (!found?.next) return;
    focusFrom.current = found.rows.length;
    read(found.next);
  };
  const filtered = FILTERS.some((k) => asked[k].trim() !== '');
  // A field's value and its typing, the same for the search and each filter.
  const field = (k: keyof ResourceFilters) => ({
    value: typed[k],
    autoComplete: 'off',
    spellcheck: false,
    onInput: (e: Event) => {
      const value = (e.target as HTMLInputElement).value;
      setTyped((now) => ({ ...now, [k]: value }));
    },
  });
  const rows = found?.rows ?? [];

  return (
    <>
      <div class="title-row">
        <h1>Resources</h1>
        <Link href="/resources/conflicts">Objects managed by two or more states</Link>
      </div>
      <form role="search" aria-label="Resource instances" class="search" onSubmit={submit}>
        <div class="search-row">
          <div class="field">
            <label for="filter-q">
              Search addresses <span class="hint">(any part, any case)</span>
            </label>
            <input id="filter-q" type="search" {...field('q')} />
          </div>
          <div class="buttons-inline">
            <button type="submit">Search</button>
            {filtered && (
              <Link href="/resources" class="button secondary">
                Clear
              </Link>
            )}
          </div>
        </div>
        <fieldset class="filters">
          <legend>Filters, each an exact match</legend>
          {EXACT.map((k) => (
            <div class="field">
              <label for={`filter-${k}`}>
                {LABELS[k].label} <span class="hint">({LABELS[k].hint})</span>
              </label>
              <input id={`filter-${k}`} type="text" {...field(k)} />
            </div>
          ))}
        </fieldset>
      </form>
      <ErrorText error={error} />
      <p role="status" class="muted">
        {loading ? 'Searching…' : found ? summary(rows.length, found.next !== null, filtered) : ''}
      </p>
      {rows.length > 0 && (
        <div class="scroll">
          <table class="resources" aria-busy={loading}>
            <caption class="visually-hidden">Resource instances found</caption>
            <thead>
              <tr>
                <th scope="col">Address</th>
                <th scope="col">State</th>
                <th scope="col">Type</th>
                <th scope="col">Provider</th>
                <th scope="col">Module</th>
                <th scope="col">Version</th>
              </tr>
            </thead>
            <tbody ref={table}>
              {rows.map((r) => (
                <tr key={`${r.state}\n${r.address}`}>
                  <th scope="row">
                    <code>{r.address}</code>
                    {r.mode === 'data' && <span class="badge data">data source</span>}
                  </th>
                  <td>
                    <Link href={`/states/${encodeURIComponent(r.state)}`}>{r.state}</Link>
                  </td>
                  <td>{r.type}</td>
                  <td class="provider">{r.provider}</td>
                  <td>{r.module || <span class="muted">root</span>}</td>
                  <td>{r.version}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      {found?.next && (
        <nav class="pager" aria-label="More resource instances">
          <button type="button" class="secondary" onClick={more} disabled={loading}>
            More results
          </button>
        </nav>
      )}
    </>
  );
}

/** What the list holds, in words, for the status line a screen reader announces. */
function summary(count: number, more: boolean, filtered: boolean): string {
  if (count === 0) return filtered ? 'No resource instance matches.' : 'The inventory holds no resource instance yet.';
  const shown = `${count} resource instance${count === 1 ? '' : 's'}`;
  return more ? `${shown} shown; more below.` : `${shown}.`;
}
