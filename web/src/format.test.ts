import { describe, expect, it } from 'vitest';

import { backendHcl } from './backend';
import { points } from './chart';
import { actor, bytes, ended, exact, linkable, relative, shortSha } from './format';
import { nameFromFile, nameProblem } from './names';
import { changes, holders, sentence } from './permissions';
import { pageOf } from './router';

describe('bytes', () => {
  it('uses binary units with one decimal below ten', () => {
    expect(bytes(0)).toBe('0 B');
    expect(bytes(1023)).toBe('1023 B');
    expect(bytes(1536)).toBe('1.5 KiB');
    expect(bytes(20 * 1024 * 1024)).toBe('20 MiB');
    expect(bytes(128 * 1024 * 1024)).toBe('128 MiB');
  });
});

describe('linkable', () => {
  it('keeps http and https addresses and refuses every other scheme', () => {
    expect(linkable('https://ci.example/runs/42')).toBe('https://ci.example/runs/42');
    expect(linkable('http://127.0.0.1:9000/r/1')).toBe('http://127.0.0.1:9000/r/1');
    expect(linkable('javascript:alert(1)')).toBeNull();
    expect(linkable(' JavaScript:alert(1)')).toBeNull();
    expect(linkable('data:text/html,<b>x</b>')).toBeNull();
    expect(linkable('not a url')).toBeNull();
    expect(linkable(null)).toBeNull();
    expect(linkable('')).toBeNull();
  });
});

describe('relative and exact times', () => {
  const now = Date.parse('2026-12-01T12:00:00Z');
  it('says how long ago, or how long until', () => {
    expect(relative('2026-12-01T11:59:50Z', now)).toBe('just now');
    expect(relative('2026-12-01T11:55:00Z', now)).toBe('5 minutes ago');
    expect(relative('2026-12-01T10:00:00Z', now)).toBe('2 hours ago');
    expect(relative('2026-11-28T12:00:00Z', now)).toBe('3 days ago');
    expect(relative('2026-12-01T13:00:00Z', now)).toBe('in 1 hour');
  });
  it('gives the exact time in UTC', () => {
    expect(exact('2026-12-01T11:55:00.123Z')).toBe('2026-12-01 11:55:00.123 UTC');
    expect(exact('2026-12-01T11:55:00Z')).toBe('2026-12-01 11:55:00 UTC');
    expect(exact('not a time')).toBe('not a time');
  });
});

describe('actors and versions in words', () => {
  it('names users, steps and the tools', () => {
    expect(actor({ kind: 'user', user: 'alice' })).toBe('alice');
    expect(actor({ kind: 'step', run: 'r1', step: 'plan', attempt: 2 })).toBe('run r1 · step plan · attempt 2');
    expect(
      actor({
        kind: 'workload',
        issuer: 'https://token.actions.githubusercontent.com',
        subject: 'repo:acme/net:ref:refs/heads/main',
        repository: 'acme/net',
        ref: 'refs/heads/main',
        run: '9001',
        job: 'deploy',
        attempt: '1',
      }),
    ).toBe('CI job deploy · run 9001 · attempt 1 · of acme/net · at refs/heads/main');
    expect(actor({ kind: 'workload', issuer: 'https://gitlab.example.com', subject: 'project_path:a/b' })).toBe(
      'CI job project_path:a/b',
    );
    expect(actor({ kind: 'cli' })).toBe('the hegemony-state command');
    expect(actor(null)).toBe('');
  });
  it('shortens a SHA-256 and says how a change ended', () => {
    expect(shortSha('a'.repeat(64))).toBe('aaaaaaaaaaaa');
    expect(ended('force_unlocked')).toBe('force-unlocked');
    expect(ended('something new')).toBe('something new');
  });
});

describe('state names', () => {
  it('follows the server naming rule', () => {
    expect(nameProblem('network')).toBeNull();
    expect(nameProblem('a.b_c-1')).toBeNull();
    expect(nameProblem('')).toMatch(/empty/);
    expect(nameProblem('.hidden')).toMatch(/start with '\.'/);
    expect(nameProblem('a/b')).toMatch(/found '\/'/);
    expect(nameProblem('é')).toMatch(/found 'é'/);
    expect(nameProblem('x'.repeat(128))).toBeNull();
    expect(nameProblem('x'.repeat(129))).toMatch(/at most 128/);
  });
  it('takes the name from the file without its ending', () => {
    expect(nameFromFile('network.tfstate')).toBe('network');
    expect(nameFromFile('network.JSON')).toBe('network');
    expect(nameFromFile('prod.net.tfstate.backup')).toBe('prod.net.tfstate.backup');
  });
});

describe('backend.hcl', () => {
  it('points every address at the state on this origin', () => {
    const hcl = backendHcl('http://127.0.0.1:8080', 'net', 'alice');
    expect(hcl).toContain('address        = "http://127.0.0.1:8080/api/tf-states/net/state"');
    expect(hcl).toContain('lock_address   = "http://127.0.0.1:8080/api/tf-states/net/lock"');
    expect(hcl).toContain('unlock_method  = "DELETE"');
    expect(hcl).toContain('username       = "alice"');
  });
});

describe('permission changes', () => {
  const defaults = {
    'tf_state:read': 'operator',
    'tf_state:write': 'operator',
    'tf_state:manage': 'admin',
    'tf_state:outputs': 'viewer',
  } as const;
  it('counts the roles at and above the one a permission needs', () => {
    expect(holders('viewer')).toEqual(['viewer', 'operator', 'admin']);
    expect(holders('admin')).toEqual(['admin']);
    expect(holders(null)).toEqual([]);
  });
  it('says who gains and who loses what', () => {
    const c = changes(defaults, { ...defaults, 'tf_state:read': 'viewer', 'tf_state:manage': null });
    expect(c.map((x) => x.permission)).toEqual(['tf_state:read', 'tf_state:manage']);
    expect(sentence(c[0])).toBe('viewers gain tf_state:read: read state content (backend reads, downloads).');
    expect(sentence(c[1])).toBe('admins lose tf_state:manage: force unlock and delete.');
    const up = changes(defaults, { ...defaults, 'tf_state:write': 'admin' });
    expect(sentence(up[0])).toBe('operators lose tf_state:write: lock, write, import and roll back.');
    expect(changes(defaults, defaults)).toEqual([]);
    const outputs = changes(defaults, { ...defaults, 'tf_state:outputs': 'operator' });
    expect(sentence(outputs[0])).toBe(
      "viewers lose tf_state:outputs: read outputs, never a sensitive one's value (terraform_remote_state).",
    );
  });
});

describe('the size chart', () => {
  it('puts versions oldest first, the largest at the top', () => {
    const pts = points([
      { version: 3, size: 50 },
      { version: 1, size: 100 },
      { version: 2, size: 0 },
    ]);
    expect(pts.map((p) => p[0])).toEqual([8, 320, 632]);
    expect(pts[0][1]).toBe(8);
    expect(pts[1][1]).toBe(112);
    expect(pts[2][1]).toBe(60);
  });
});

describe('paths', () => {
  it('names the page a path shows', () => {
    expect(pageOf('/')).toEqual({ page: 'overview' });
    expect(pageOf('/states')).toEqual({ page: 'states' });
    expect(pageOf('/states/')).toEqual({ page: 'states' });
    expect(pageOf('/resources')).toEqual({ page: 'resources' });
    expect(pageOf('/resources/conflicts')).toEqual({ page: 'conflicts' });
    expect(pageOf('/resources/x')).toEqual({ page: 'missing' });
    expect(pageOf('/states/net%2Ea')).toEqual({ page: 'state', name: 'net.a' });
    expect(pageOf('/audit')).toEqual({ page: 'audit' });
    expect(pageOf('/nope/x')).toEqual({ page: 'missing' });
    expect(pageOf('/states/%E0')).toEqual({ page: 'missing' });
    expect(pageOf('/states/50%')).toEqual({ page: 'missing' });
  });
});
