// The inventory's pages in pure functions: a search's filters read from and written to a
// query string (the page's address and the API's are the same one), ages in words, the
// overview's locks and holds as one list, and a state's conflicts grouped by the other
// state, with names in a sentence. No I/O and no rendering; unit-tested, and called by
// pages/Overview.tsx, pages/Resources.tsx, pages/Conflicts.tsx and pages/state/Conflicts.tsx.

import type { Conflict, Overview } from './types';

/** What a search filters by: each left out of a query when empty. */
export interface ResourceFilters {
  q: string;
  type: string;
  provider: string;
  module: string;
  state: string;
}

/** The filters in the order they appear in an address, so one search has one address. */
export const FILTERS: (keyof ResourceFilters)[] = ['q', 'type', 'provider', 'module', 'state'];

/** The filters an address's query names; an absent one is empty. */
export function filtersOf(params: URLSearchParams): ResourceFilters {
  const get = (k: keyof ResourceFilters) => params.get(k) ?? '';
  return { q: get('q'), type: get('type'), provider: get('provider'), module: get('module'), state: get('state') };
}

/**
 * The query string (without `?`) of a search: each non-blank filter, trimmed (a space typed
 * after a word would otherwise match no address), then `extra` (a cursor, a limit) when set.
 */
export function searchQuery(filters: Partial<ResourceFilters>, extra: Record<string, string | null> = {}): string {
  const params = new URLSearchParams();
  for (const k of FILTERS) {
    const v = filters[k]?.trim();
    if (v) params.set(k, v);
  }
  for (const [k, v] of Object.entries(extra)) if (v) params.set(k, v);
  return params.toString();
}

/** The Resources page's address for `filters`. */
export function resourcesHref(filters: Partial<ResourceFilters>): string {
  const query = searchQuery(filters);
  return query ? `/resources?${query}` : '/resources';
}

const UNITS: [number, string][] = [
  [86400, 'day'],
  [3600, 'hour'],
  [60, 'minute'],
  [1, 'second'],
];

const words = (n: number, unit: string) => `${n} ${unit}${n === 1 ? '' : 's'}`;

/**
 * How long something has lasted, in its two largest units, rounded down: `45 seconds`,
 * `12 minutes 5 seconds`, `3 hours`, `12 days 1 hour`; the second unit is left out when
 * zero. A lock held for days reads differently from one held for seconds; a count of
 * seconds does not show that at a glance.
 */
export function age(seconds: number): string {
  const total = Math.max(0, Math.floor(seconds));
  const first = UNITS.findIndex(([size]) => total >= size);
  if (first === -1) return words(0, 'second');
  const [size, unit] = UNITS[first];
  const whole = Math.floor(total / size);
  const rest = total - whole * size;
  const next = UNITS[first + 1];
  if (!next) return words(whole, unit);
  const part = Math.floor(rest / next[0]);
  return part === 0 ? words(whole, unit) : `${words(whole, unit)} ${words(part, next[1])}`;
}

/** A lock or a hold on a state, as the overview lists them together. */
export interface Held {
  state: string;
  kind: 'lock' | 'hold';
  /** Who holds a lock, or the run that holds a state until its apply. */
  by: string;
  since: string;
  age_seconds: number;
}

/**
 * The overview's locks and holds in one list, the oldest first (a forgotten lock is what the
 * list is for), a state's lock before its hold when both are as old.
 */
export function locksAndHolds(overview: Pick<Overview, 'locks' | 'holds'>): Held[] {
  const all: Held[] = [
    ...overview.locks.map((l) => ({ state: l.state, kind: 'lock' as const, by: l.who, since: l.since, age_seconds: l.age_seconds })),
    ...overview.holds.map((h) => ({ state: h.state, kind: 'hold' as const, by: `run ${h.run}`, since: h.since, age_seconds: h.age_seconds })),
  ];
  return all.sort(
    (a, b) => b.age_seconds - a.age_seconds || a.state.localeCompare(b.state) || (a.kind === b.kind ? 0 : a.kind === 'lock' ? -1 : 1),
  );
}

/** One other state that manages objects `state` manages too. */
export interface SharedWith {
  /** The other state. */
  state: string;
  /** Each object both manage: its address here and its address there. */
  objects: { here: string; there: string; type: string }[];
}

/**
 * The conflicts `state` is in, by the other state: which of its addresses each other state
 * manages too, under which address there. Other states by name, objects by address here.
 */
export function sharedWith(conflicts: Conflict[], state: string): SharedWith[] {
  const byState = new Map<string, SharedWith['objects']>();
  for (const group of conflicts) {
    const here = group.instances.filter((i) => i.state === state);
    for (const there of group.instances.filter((i) => i.state !== state)) {
      const objects = byState.get(there.state) ?? [];
      for (const mine of here) objects.push({ here: mine.address, there: there.address, type: group.type });
      byState.set(there.state, objects);
    }
  }
  return [...byState.entries()]
    .filter(([, objects]) => objects.length > 0)
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([other, objects]) => ({
      state: other,
      objects: objects.sort((a, b) => a.here.localeCompare(b.here) || a.there.localeCompare(b.there)),
    }));
}

/** The states a conflict's instances are in, each once, in order. */
export function statesOf(conflict: Conflict): string[] {
  return [...new Set(conflict.instances.map((i) => i.state))];
}

/** Names in a sentence: `a`, `a and b`, `a, b and c`. */
export function inWords(names: string[]): string {
  if (names.length <= 1) return names.join('');
  return `${names.slice(0, -1).join(', ')} and ${names[names.length - 1]}`;
}
