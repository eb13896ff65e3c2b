// How a comparison of two versions reads on the state page: the `+a ~c -r` counts (and
// their words for a screen reader), each changed instance's attribute paths with the
// sensitive ones marked, and what changed about an output. Names and paths only: the API
// answers no value, and nothing here makes one up. Pure functions, unit-tested.

import type { ChangeCounts, ChangedInstance, ChangedOutput, Comparison } from './types';

/** `+3 ~1 -0`, as a plan summary reads. */
export function countsText(c: ChangeCounts): string {
  return `+${c.added} ~${c.changed} -${c.removed}`;
}

/** The same counts in words: `3 added, 1 changed, 0 removed`. */
export function countsWords(c: ChangeCounts): string {
  return `${c.added} added, ${c.changed} changed, ${c.removed} removed`;
}

/** One attribute path of a changed instance, and whether either version marks it sensitive. */
export interface PathPart {
  path: string;
  sensitive: boolean;
}

/** A changed instance's attribute paths in the API's order, the sensitive ones marked. */
export function pathParts(i: ChangedInstance): PathPart[] {
  const sensitive = new Set(i.sensitive);
  return i.attributes.map((path) => ({ path, sensitive: sensitive.has(path) }));
}

/** The instance's other fields that differ, in words: `also: status, dependencies`. */
export function otherText(i: ChangedInstance): string | null {
  return i.other.length ? `also: ${i.other.join(', ')}` : null;
}

/** What changed about an output that is in both versions. */
export function outputChange(o: ChangedOutput): string {
  const parts: string[] = [];
  if (o.value_changed) parts.push('value changed');
  if (o.sensitive && !o.was_sensitive) parts.push('became sensitive');
  if (!o.sensitive && o.was_sensitive) parts.push('no longer sensitive');
  return parts.join(', ');
}

/** True when the comparison found nothing added, changed or removed, in resources or outputs. */
export function nothingChanged(c: Comparison): boolean {
  const { resources: r, outputs: o } = c;
  return [r.added, r.changed, r.removed, o.added, o.changed, o.removed].every((l) => l.length === 0);
}

/**
 * A `changes` or `since` query parameter as a version number: a whole number from 1 up,
 * digits only, at most 15 of them so the number is exact (a mistyped address compares
 * nothing rather than something else).
 */
export function versionParam(value: string | null): number | null {
  if (value === null || !/^[1-9][0-9]{0,14}$/.test(value)) return null;
  return Number(value);
}
