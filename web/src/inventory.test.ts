import { describe, expect, it } from 'vitest';

import { barLength } from './chart';
import { age, filtersOf, inWords, locksAndHolds, resourcesHref, searchQuery, sharedWith, statesOf } from './inventory';
import type { Conflict, Resource } from './types';

const at = (state: string, address: string, type = 'terraform_data'): Resource => ({
  state,
  address,
  type,
  version: 1,
  module: '',
  mode: 'managed',
  provider: 'terraform.io/builtin/terraform',
});

describe('a search in the address', () => {
  it('reads every filter from a query, an absent one empty', () => {
    expect(filtersOf(new URLSearchParams('q=sub&type=aws_vpc&state=net'))).toEqual({
      q: 'sub',
      type: 'aws_vpc',
      provider: '',
      module: '',
      state: 'net',
    });
  });

  it('writes the filters in one order, trimmed, leaving blank ones out, then the cursor', () => {
    const query = searchQuery({ state: 'net', q: ' subnet[1 ', provider: '   ', module: 'module.a["x"]' }, { cursor: 'abc', limit: null });
    expect(query).toBe('q=subnet%5B1&module=module.a%5B%22x%22%5D&state=net&cursor=abc');
    expect(filtersOf(new URLSearchParams(query))).toEqual({ q: 'subnet[1', type: '', provider: '', module: 'module.a["x"]', state: 'net' });
  });

  it('links to the Resources page, with no question mark when nothing is filtered', () => {
    expect(resourcesHref({})).toBe('/resources');
    expect(resourcesHref({ q: '', type: '' })).toBe('/resources');
    expect(resourcesHref({ type: 'aws_s3_bucket' })).toBe('/resources?type=aws_s3_bucket');
    expect(resourcesHref({ provider: 'registry.terraform.io/hashicorp/aws' })).toBe(
      '/resources?provider=registry.terraform.io%2Fhashicorp%2Faws',
    );
  });
});

describe('ages', () => {
  it('says an age in its two largest units, rounded down', () => {
    expect(age(0)).toBe('0 seconds');
    expect(age(1)).toBe('1 second');
    expect(age(59.9)).toBe('59 seconds');
    expect(age(60)).toBe('1 minute');
    expect(age(125)).toBe('2 minutes 5 seconds');
    expect(age(3600)).toBe('1 hour');
    expect(age(3 * 3600 + 5 * 60 + 59)).toBe('3 hours 5 minutes');
    expect(age(86400 + 3600)).toBe('1 day 1 hour');
    expect(age(12 * 86400 + 59 * 60)).toBe('12 days');
    expect(age(400 * 86400)).toBe('400 days');
  });

  it('takes a clock that ran backwards as no time at all', () => {
    expect(age(-5)).toBe('0 seconds');
  });
});

describe("the overview's locks and holds", () => {
  it('lists both, the oldest first, a lock before a hold of the same age', () => {
    const rows = locksAndHolds({
      locks: [
        { state: 'b', since: '2026-01-01T00:00:00Z', age_seconds: 60, who: 'ada' },
        { state: 'a', since: '2026-01-01T00:00:00Z', age_seconds: 7200, who: 'run r1 · step apply · attempt 1' },
      ],
      holds: [
        { state: 'a', since: '2026-01-01T00:00:00Z', age_seconds: 7200, run: 'r1' },
        { state: 'c', since: '2026-01-01T00:00:00Z', age_seconds: 600, run: 'r2' },
      ],
    });
    expect(rows.map((r) => [r.state, r.kind, r.by])).toEqual([
      ['a', 'lock', 'run r1 · step apply · attempt 1'],
      ['a', 'hold', 'run r1'],
      ['c', 'hold', 'run r2'],
      ['b', 'lock', 'ada'],
    ]);
  });
});

describe("a state's conflicts", () => {
  const conflicts: Conflict[] = [
    { type: 'terraform_data', instances: [at('app', 'terraform_data.b'), at('copy', 'terraform_data.b'), at('old', 'terraform_data.legacy')] },
    { type: 'terraform_data', instances: [at('app', 'terraform_data.a'), at('copy', 'terraform_data.a')] },
    { type: 'aws_vpc', instances: [at('copy', 'aws_vpc.main', 'aws_vpc'), at('net', 'aws_vpc.this', 'aws_vpc')] },
  ];

  it('groups what it shares by the other state, under the address each gives it', () => {
    expect(sharedWith(conflicts, 'app')).toEqual([
      {
        state: 'copy',
        objects: [
          { here: 'terraform_data.a', there: 'terraform_data.a', type: 'terraform_data' },
          { here: 'terraform_data.b', there: 'terraform_data.b', type: 'terraform_data' },
        ],
      },
      { state: 'old', objects: [{ here: 'terraform_data.b', there: 'terraform_data.legacy', type: 'terraform_data' }] },
    ]);
  });

  it('leaves out the groups the state is not in, and says nothing when it is in none', () => {
    expect(sharedWith(conflicts, 'net')).toEqual([{ state: 'copy', objects: [{ here: 'aws_vpc.this', there: 'aws_vpc.main', type: 'aws_vpc' }] }]);
    expect(sharedWith(conflicts, 'quiet')).toEqual([]);
    expect(sharedWith([], 'app')).toEqual([]);
  });

  it("names a group's states once each, in order, in a sentence", () => {
    const twice: Conflict = { type: 't', instances: [at('a', 'x'), at('a', 'y'), at('b', 'x')] };
    expect(statesOf(twice)).toEqual(['a', 'b']);
    expect(inWords(statesOf(twice))).toBe('a and b');
    expect(inWords(['net'])).toBe('net');
    expect(inWords(['a', 'b', 'c'])).toBe('a, b and c');
    expect(inWords([])).toBe('');
  });
});

describe('the bar chart', () => {
  it('scales each bar to the largest, keeping a count above zero visible', () => {
    expect(barLength(50, 100)).toBe(50);
    expect(barLength(100, 100)).toBe(100);
    expect(barLength(0, 100)).toBe(0);
    expect(barLength(1, 100_000)).toBe(1);
    expect(barLength(3, 0)).toBe(0);
  });
});
