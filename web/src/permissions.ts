// What a change of the org's allocation means, in words: for each permission that changes,
// which roles gain it and which lose it. The confirmation shows this before saving.

import type { Allocation, Permission, Role } from './types';

export const PERMISSIONS: Permission[] = ['tf_state:read', 'tf_state:write', 'tf_state:manage', 'tf_state:outputs'];
export const ROLES: Role[] = ['viewer', 'operator', 'admin'];

export const WHAT: Record<Permission, string> = {
  'tf_state:read': 'read state content (backend reads, downloads)',
  'tf_state:write': 'lock, write, import and roll back',
  'tf_state:manage': 'force unlock and delete',
  'tf_state:outputs': "read outputs, never a sensitive one's value (terraform_remote_state)",
};

/** The roles that hold a permission allocated to `needed` (or none, when disabled). */
export function holders(needed: Role | null): Role[] {
  if (needed === null) return [];
  return ROLES.slice(ROLES.indexOf(needed));
}

export interface Change {
  permission: Permission;
  from: Role | null;
  to: Role | null;
  gain: Role[];
  lose: Role[];
}

/** The permissions that differ between `before` and `after`, with who gains and loses them. */
export function changes(before: Allocation, after: Allocation): Change[] {
  return PERMISSIONS.filter((p) => before[p] !== after[p]).map((permission) => {
    const had = holders(before[permission]);
    const have = holders(after[permission]);
    return {
      permission,
      from: before[permission],
      to: after[permission],
      gain: have.filter((r) => !had.includes(r)),
      lose: had.filter((r) => !have.includes(r)),
    };
  });
}

const plural = (roles: Role[]): string => roles.map((r) => `${r}s`).join(' and ');

/** One change as a sentence: `viewers gain tf_state:read (read state content ...)`. */
export function sentence(c: Change): string {
  const parts: string[] = [];
  if (c.gain.length) parts.push(`${plural(c.gain)} gain ${c.permission}`);
  if (c.lose.length) parts.push(`${plural(c.lose)} lose ${c.permission}`);
  return `${parts.join('; ')}: ${WHAT[c.permission]}.`;
}
