import { describe, expect, it } from 'vitest';

import { changedOnlyBy, parseClaims, protectionText, warnings } from './trust';

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
