// How values read on the pages: sizes in human units, times relative (the exact time on
// hover), actors in words. Pure functions, unit-tested.

import type { Actor } from './types';

const UNITS = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];

/** `1536` -> `1.5 KiB`; bytes below 1 KiB as they are. */
export function bytes(n: number): string {
  let value = n;
  let unit = 0;
  while (value >= 1024 && unit < UNITS.length - 1) {
    value /= 1024;
    unit += 1;
  }
  if (unit === 0) return `${n} B`;
  const digits = value < 10 ? 1 : 0;
  return `${value.toFixed(digits)} ${UNITS[unit]}`;
}

/** `at` relative to `now`: `just now`, `5 minutes ago`, `in 2 hours`, `3 days ago`. */
export function relative(at: string, now: number = Date.now()): string {
  const then = Date.parse(at);
  if (Number.isNaN(then)) return at;
  const seconds = Math.round((then - now) / 1000);
  const abs = Math.abs(seconds);
  if (abs < 45) return 'just now';
  const steps: [number, string][] = [
    [60, 'minute'],
    [3600, 'hour'],
    [86400, 'day'],
    [2592000, 'month'],
    [31536000, 'year'],
  ];
  let [size, name] = steps[0];
  for (const step of steps) {
    if (abs >= step[0] * 0.9) [size, name] = step;
  }
  const count = Math.max(1, Math.round(abs / size));
  const words = `${count} ${name}${count === 1 ? '' : 's'}`;
  return seconds < 0 ? `${words} ago` : `in ${words}`;
}

/** The exact time, as shown on hover: ISO 8601 in UTC, to the millisecond (left out when zero). */
export function exact(at: string): string {
  const then = Date.parse(at);
  if (Number.isNaN(then)) return at;
  return new Date(then).toISOString().replace('.000Z', 'Z').replace('T', ' ').replace('Z', ' UTC');
}

/** Who an actor is, in words. */
export function actor(a: Actor | null | undefined): string {
  if (!a) return '';
  switch (a.kind) {
    case 'user':
      return a.user;
    case 'step':
      return `run ${a.run} · step ${a.step} · attempt ${a.attempt}`;
    case 'cli':
      return 'the hegemony-state command';
    case 'sweeper':
      return 'the sweeper';
    case 'platform':
      return 'the platform';
    case 'workload':
      return workload(a);
  }
}

/** A CI job (an OpenID Connect workload) in words: which job, of which run, repository and
 * ref, as its lock's Info says it. */
function workload(a: Extract<Actor, { kind: 'workload' }>): string {
  const parts = [`CI job ${a.job ?? a.subject}`];
  if (a.run) parts.push(`run ${a.run}`);
  if (a.attempt) parts.push(`attempt ${a.attempt}`);
  if (a.repository) parts.push(`of ${a.repository}`);
  if (a.ref) parts.push(`at ${a.ref}`);
  return parts.join(' · ');
}

/** The first 12 hex digits of a SHA-256, enough to tell versions apart at a glance. */
export function shortSha(sha: string): string {
  return sha.slice(0, 12);
}

/** How a version's change ended, in words. */
export function ended(e: string): string {
  const words: Record<string, string> = {
    released: 'lock released',
    expired: 'lock expired',
    force_unlocked: 'force-unlocked',
    open: 'lock still held',
    unlocked_write: 'written without a lock',
    import: 'imported',
    rollback: 'rolled back',
  };
  return words[e] ?? e;
}

/**
 * A run's address as a link target, only when it is `http:` or `https:`: the address comes
 * from the server's run URL template, and a `javascript:` or `data:` one must never become a
 * link (the CSP would block it, and the page should not depend on that).
 */
export function linkable(url: string | null | undefined): string | null {
  if (!url) return null;
  try {
    const { protocol } = new URL(url);
    return protocol === 'http:' || protocol === 'https:' ? url : null;
  } catch {
    return null;
  }
}
