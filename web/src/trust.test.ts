import { describe, expect, it } from 'vitest';

import { changedOnlyBy, orgRules, parseClaims, protectionText, warnings } from './trust';

describe('trust policies', () => {
  it('reads claim=value lines and says which line is not one', () => {
    expect(parseClaims('repository_id=123\n\nref = refs/heads/* \n')).toEqual({
      claims: { repository_id: '123', ref: 'refs/heads/*' },
    });
    expect(parseClaims('ref')).toEqual({ error: '"ref" is not claim=value.' });
    expect(parseClaims('project_id=')).toEqual({ error: 'Claim project_id has no value.' });
  });

  it('warns on names only, as the server does, and not with an immutable id', () => {
    expect(warnings({ repository: 'acme/net' })[0]).toContain('repository by name only');
    expect(warnings({ project_path: 'acme/net', project_id: '42' })).toEqual([]);
    expect(warnings({})[0]).toContain('No claim conditions');
  });

  it('warns on every claim that carries a name, naming them all, as the server does', () => {
    const claims = { sub: 'repo:acme/net:ref:refs/heads/main', job_workflow_ref: 'acme/ci/.github/workflows/d.yml@main' };
    expect(warnings(claims)).toEqual([
      'Matches on sub and job_workflow_ref by name only: a name can be taken again by someone else after a rename or a delete. Add an immutable id condition (repository_id, repository_owner_id, project_id, namespace_id).',
    ]);
    expect(warnings({ repository_owner: 'acme' })[0]).toContain('repository_owner by name only');
    expect(warnings({ namespace_path: 'acme', namespace_id: '7' })).toEqual([]);
    expect(warnings({ ref: 'refs/heads/main' })).toEqual([]);
  });

  it("hints at the org's rules a new policy breaks: the audience's /<org>, an exact id on a shared issuer", () => {
    const audience = 'https://state.example.com/orgs/acme';
    const rules = (issuer: string, claims: Record<string, string>, aud = audience) =>
      orgRules({ issuer, audience: aud, claims }, 'acme');
    const github = 'https://token.actions.githubusercontent.com';
    expect(rules(github, { repository_owner_id: '99' })).toEqual([]);
    expect(rules(github, { repository_id: '1' }, 'https://state.example.com')).toEqual([
      "The audience must end with /acme, the org's name (for example https://state.example.com/orgs/acme), so no other org on this deployment can take the audience your jobs ask for.",
    ]);
    // The org's name as the last segment, not the end of a longer one.
    expect(rules(github, { repository_id: '1' }, 'https://state.example.com/orgs/notacme')).toHaveLength(1);
    // A name, or an id with a *, is no owner id.
    expect(rules(github, { repository: 'acme/net', repository_id: '1*' })).toEqual([
      'A policy on the shared issuer https://token.actions.githubusercontent.com must hold an exact condition on repository_owner_id or repository_id: names can be taken by anyone on that issuer, ids cannot.',
    ]);
    expect(rules('https://gitlab.com', { project_path: 'acme/net' })[0]).toContain(
      'exact condition on namespace_id or project_id',
    );
    expect(rules('https://gitlab.com', { namespace_id: '7' })).toEqual([]);
    // Another issuer is the org's own: names are warned about, not refused.
    expect(rules('https://gitlab.acme.example', { project_path: 'acme/net' })).toEqual([]);
  });

  it('says which policies change a protected state: those every matching rule names', () => {
    const prod = { pattern: 'prod-*', policies: ['deploy', 'network'] };
    const net = { pattern: '*-net', policies: ['network'] };
    expect(changedOnlyBy([])).toEqual([]);
    expect(changedOnlyBy([prod, net])).toEqual(['network']);
    expect(protectionText([])).toBeNull();
    expect(protectionText([prod])).toBe('Protected (prod-*): changed only by CI jobs of deploy, network');
    expect(protectionText([prod, { pattern: 'x', policies: ['other'] }])).toContain('no trust policy in common');
  });
});
