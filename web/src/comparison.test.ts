import { describe, expect, it } from 'vitest';

import { countsText, countsWords, nothingChanged, otherText, outputChange, pathParts, versionParam } from './comparison';
import type { ChangedInstance, Comparison } from './types';

const role: ChangedInstance = {
  address: 'module.app["eu"].aws_iam_role.app[0]',
  module: 'module.app["eu"]',
  mode: 'managed',
  type: 'aws_iam_role',
  name: 'app',
  index_key: 0,
  deposed: null,
  attributes: ['password', 'policy', 'tags.team'],
  sensitive: ['password'],
  sensitive_only: false,
  other: [],
};

describe('counts', () => {
  it('reads like a plan summary, and in words', () => {
    expect(countsText({ added: 3, changed: 1, removed: 0 })).toBe('+3 ~1 -0');
    expect(countsWords({ added: 3, changed: 1, removed: 0 })).toBe('3 added, 1 changed, 0 removed');
  });
});

describe('pathParts', () => {
  it('keeps the order of the paths and marks only the sensitive ones', () => {
    expect(pathParts(role)).toEqual([
      { path: 'password', sensitive: true },
      { path: 'policy', sensitive: false },
      { path: 'tags.team', sensitive: false },
    ]);
  });
});

describe('otherText', () => {
  it('names the other fields that differ, or nothing', () => {
    expect(otherText(role)).toBeNull();
    expect(otherText({ ...role, other: ['status', 'dependencies'] })).toBe('also: status, dependencies');
  });
});

describe('outputChange', () => {
  it('says whether the value or the sensitivity changed', () => {
    expect(outputChange({ name: 'a', sensitive: false, was_sensitive: false, value_changed: true })).toBe('value changed');
    expect(outputChange({ name: 'a', sensitive: true, was_sensitive: false, value_changed: false })).toBe('became sensitive');
    expect(outputChange({ name: 'a', sensitive: false, was_sensitive: true, value_changed: true })).toBe(
      'value changed, no longer sensitive',
    );
  });
});

describe('nothingChanged', () => {
  const empty: Comparison = {
    state: 's',
    version: { version: 2, serial: 2, lineage: 'l', terraform_version: '1.11.4' },
    since: { version: 1, serial: 1, lineage: 'l', terraform_version: '1.11.4' },
    same_lineage: true,
    counts: { added: 0, changed: 0, removed: 0 },
    resources: { added: [], changed: [], removed: [] },
    outputs: { added: [], changed: [], removed: [] },
  };
  it('is true only when neither resources nor outputs changed', () => {
    expect(nothingChanged(empty)).toBe(true);
    expect(nothingChanged({ ...empty, outputs: { ...empty.outputs, removed: [{ name: 'x', sensitive: false }] } })).toBe(false);
    expect(nothingChanged({ ...empty, resources: { ...empty.resources, changed: [role] } })).toBe(false);
  });
});

describe('versionParam', () => {
  it('takes a whole number from 1, digits only', () => {
    expect(versionParam('5')).toBe(5);
    expect(versionParam('120')).toBe(120);
    expect(versionParam('999999999999999')).toBe(999999999999999);
    for (const bad of [null, '', '0', '-1', '01', '1.5', '5x', ' 5', '1e3', '9007199254740993']) {
      expect(versionParam(bad), String(bad)).toBeNull();
    }
  });
});
