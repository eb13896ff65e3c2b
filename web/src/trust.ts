// Trust policies for CI jobs: the presets the page offers, the claim lines it reads, the
// warning for a policy that matches a repository or project by name only, and the hints for
// the rules a new policy must meet to be taken. Both are the server's domain rules
// (shared/src/domain/trust.rs `warnings` and `check_for_org`), said here as the server says
// them so the form tells an admin before sending; the server stays the judge.

import type { Protection, TrustPolicy } from './types';

/**
 * Claims that name a repository, owner, project, group or workflow by a name someone else can
 * take later, or that carry such a name (`sub`, `job_workflow_ref`).
 */
export const NAME_CLAIMS = [
  'repository',
  'project_path',
  'sub',
  'repository_owner',
  'namespace_path',
  'job_workflow_ref',
];
/** Claims that identify a repository, owner, project or group for good. */
export const IMMUTABLE_CLAIMS = ['repository_id', 'repository_owner_id', 'project_id', 'namespace_id'];

/**
 * The shared issuers, whose tokens every customer of theirs can mint, each with the claims one
 * of which a policy on it must hold exactly (no `*`): an id no other account has.
 */
export const SHARED_ISSUERS: [string, string[]][] = [
  ['https://token.actions.githubusercontent.com', ['repository_owner_id', 'repository_id']],
  ['https://gitlab.com', ['namespace_id', 'project_id']],
];

export interface Preset {
  label: string;
  issuer: string;
  /** Claim conditions to start from; the values are examples to replace. */
  claims: string;
}

export const PRESETS: Record<string, Preset> = {
  github: {
    label: 'GitHub Actions',
    issuer: 'https://token.actions.githubusercontent.com',
    claims: 'repository_id=\nrepository_owner_id=\nref=refs/heads/main\nenvironment=production\n',
  },
  gitlab: {
    label: 'GitLab CI',
    issuer: 'https://gitlab.com',
    claims: 'project_id=\nnamespace_id=\nref=main\nref_protected=true\nenvironment=production\n',
  },
  other: { label: 'Another issuer', issuer: 'https://', claims: '' },
};

/** `claim=value` lines as a claims map, or the first line that is not one. */
export function parseClaims(text: string): { claims: Record<string, string> } | { error: string } {
  const claims: Record<string, string> = {};
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (line === '') continue;
    const at = line.indexOf('=');
    if (at <= 0) return { error: `"${line}" is not claim=value.` };
    const value = line.slice(at + 1).trim();
    if (value === '') return { error: `Claim ${line.slice(0, at).trim()} has no value.` };
    claims[line.slice(0, at).trim()] = value;
  }
  return { claims };
}

/** What an admin should know about a policy's claims, as the server's rule says it. */
export function warnings(claims: Record<string, string>): string[] {
  const byName = NAME_CLAIMS.filter((c) => c in claims);
  const byId = IMMUTABLE_CLAIMS.some((c) => c in claims);
  const out: string[] = [];
  if (byName.length > 0 && !byId) {
    out.push(
      `Matches on ${byName.join(' and ')} by name only: a name can be taken again by someone else after a rename or a delete. Add an immutable id condition (${IMMUTABLE_CLAIMS.join(', ')}).`,
    );
  }
  if (Object.keys(claims).length === 0) out.push('No claim conditions: every job of the issuer with this audience is let in.');
  return out;
}

/**
 * The rules of `org` a new policy breaks, as the server's refusal says them: its audience must
 * end with `/<org>`, and on a shared issuer it must hold an exact owner or repository id.
 */
export function orgRules(
  policy: { issuer: string; audience: string; claims: Record<string, string> },
  org: string,
): string[] {
  const out: string[] = [];
  if (!policy.audience.endsWith(`/${org}`)) {
    out.push(
      `The audience must end with /${org}, the org's name (for example https://state.example.com/orgs/${org}), so no other org on this deployment can take the audience your jobs ask for.`,
    );
  }
  const ids = SHARED_ISSUERS.find(([issuer]) => issuer === policy.issuer)?.[1];
  if (ids && !ids.some((id) => id in policy.claims && !policy.claims[id].includes('*'))) {
    out.push(
      `A policy on the shared issuer ${policy.issuer} must hold an exact condition on ${ids.join(' or ')}: names can be taken by anyone on that issuer, ids cannot.`,
    );
  }
  return out;
}

/** A policy's claims as one line. */
export function claimsText(policy: TrustPolicy): string {
  return Object.entries(policy.claims)
    .map(([k, v]) => `${k}=${v}`)
    .join(' ');
}

/**
 * The trust policies whose CI sessions may change a state the `rules` match: those every
 * matching rule names (the server's rule, shared/src/domain/protection.rs `check_change`).
 * Empty for a state no rule matches, and for one whose rules name no policy in common.
 */
export function changedOnlyBy(rules: Protection[]): string[] {
  if (rules.length === 0) return [];
  return rules[0].policies.filter((p) => rules.every((r) => r.policies.includes(p)));
}

/** What the list and a state's page say of a protected state; null for one no rule matches. */
export function protectionText(rules: Protection[]): string | null {
  if (rules.length === 0) return null;
  const policies = changedOnlyBy(rules);
  const patterns = rules.map((r) => r.pattern).join(', ');
  return policies.length === 0
    ? `Protected (${patterns}): its rules name no trust policy in common, so no CI job changes it`
    : `Protected (${patterns}): changed only by CI jobs of ${policies.join(', ')}`;
}
