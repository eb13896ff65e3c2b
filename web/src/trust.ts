// Trust policies for CI jobs: the presets the page offers, the claim lines it reads, and the
// warning for a policy that matches a repository or project by name only. The warning is the
// server's domain rule (shared/src/domain/trust.rs `warnings`), said here as the command says it.

import type { Protection, TrustPolicy } from './types';

/** Claims that name a repository or project by a name someone else can take later. */
export const NAME_CLAIMS = ['repository', 'project_path'];
/** Claims that identify a repository, owner, project or group for good. */
export const IMMUTABLE_CLAIMS = ['repository_id', 'repository_owner_id', 'project_id', 'namespace_id'];

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
