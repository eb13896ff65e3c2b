// How a page reads what it shows from the API: `useLoad` (one value, read again when what it
// depends on changes or after the page changed it), `usePaged` (one page of a list the API
// pages with a cursor, the cursor kept in the address), the `Pager` under such a list, and
// `NotYet`, what a page shows until its value has come. Nothing here knows a page's API.

import type { ComponentChildren } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';

import { api } from './api';
import { ErrorText, Link } from './components';

/** What a page loaded, and how it is going. */
export interface Loaded<T> {
  /** The last value read, kept while the next read runs; null before the first answer. */
  value: T | null;
  /** Why the last read failed, in words; null once one succeeds. */
  error: string | null;
  /** True from the start of a read to its answer. */
  loading: boolean;
  /** Reads again (after the page changed something), keeping what is shown meanwhile. */
  reload: () => Promise<void>;
  /** Shows a value the page got another way (an action's answer) as if it had been read. */
  set: (value: T) => void;
}

/**
 * Reads `load()` when the page opens and whenever `deps` change; `load` null reads nothing
 * (a page the role may not see). Only the newest read is shown: an answer that comes after a
 * later read began, or after the page closed, is dropped, so a slow first page cannot
 * replace the second one asked for.
 */
export function useLoad<T>(load: (() => Promise<T>) | null, deps: unknown[]): Loaded<T> {
  const [value, setValue] = useState<T | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [loading, setLoading] = useState(load !== null);
  // The number of the newest read; a read whose number is no longer it is stale.
  const newest = useRef(0);
  // The `load` of the last render: `reload` reads with what the page now shows.
  const current = useRef(load);
  current.current = load;

  const read = async () => {
    const run = current.current;
    if (!run) return;
    const mine = ++newest.current;
    setLoading(true);
    try {
      const answer = await run();
      if (mine !== newest.current) return;
      setValue(() => answer);
      setError(null);
    } catch (e) {
      if (mine !== newest.current) return;
      setError((e as Error).message);
    } finally {
      if (mine === newest.current) setLoading(false);
    }
  };
  useEffect(() => {
    read();
    return () => {
      newest.current++;
    };
  }, deps);

  return { value, error, loading, reload: read, set: (v: T) => setValue(() => v) };
}

/** A page of a list, and the address of the next one. */
export interface Paged<T> extends Loaded<T> {
  /** The cursor of the page shown (from the address), null on the first page. */
  cursor: string | null;
  /** The address of the page after this one, null on the last. */
  next: string | null;
}

/**
 * One page of the list at `from` (`/api/...`), `size` rows, on the page at `here`: the
 * address's `?cursor=` says which page, and `filters` (each left out when empty) go both to
 * the API and into the next page's address, before the cursor. `enabled` false reads nothing.
 */
export function usePaged<T extends { next_cursor: string | null }>(options: {
  location: URL;
  from: string;
  here: string;
  size: number;
  filters?: Record<string, string>;
  enabled?: boolean;
}): Paged<T> {
  const { location, from, here, size, filters = {}, enabled = true } = options;
  const cursor = location.searchParams.get('cursor');
  // The API's query and the next page's address: the filters, then the cursor.
  const query = (c: string | null, first: Record<string, string> = {}) => {
    const params = new URLSearchParams(first);
    for (const [k, v] of Object.entries(filters)) if (v) params.set(k, v);
    if (c) params.set('cursor', c);
    return params;
  };
  const read = () => api<T>('GET', `${from}?${query(cursor, { limit: String(size) })}`);
  const loaded = useLoad(enabled ? read : null, [from, cursor, ...Object.values(filters)]);
  const after = loaded.value?.next_cursor ?? null;
  return { ...loaded, cursor, next: after === null ? null : `${here}?${query(after)}` };
}

/**
 * Under a paged list: back to the page before (the browser's history, which came from it),
 * and on to the next; `previous` and `next` name the two in the list's own words.
 */
export function Pager(props: { of: { cursor: string | null; next: string | null }; label: string; previous?: string; next?: string }) {
  const { cursor, next } = props.of;
  return (
    <nav class="pager" aria-label={props.label}>
      {cursor && (
        <button type="button" class="secondary" onClick={() => history.back()}>
          {props.previous ?? 'Previous page'}
        </button>
      )}
      {next && (
        <Link href={next} class="button secondary">
          {props.next ?? 'Next page'}
        </Link>
      )}
    </nav>
  );
}

/**
 * What a page shows before its value has come: "Loading…", or, when reading it failed, the
 * page's heading (`children`), the error, then `after` (a way back).
 */
export function NotYet(props: { error: string | null; children: ComponentChildren; after?: ComponentChildren }) {
  if (!props.error) return <p>Loading…</p>;
  return (
    <>
      {props.children}
      <ErrorText error={props.error} />
      {props.after}
    </>
  );
}
