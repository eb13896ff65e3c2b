// Restoring and purging a deleted state: the body a restore sends (none for the name the
// state had, the typed name otherwise), and a refused restore or purge in words. Pure
// functions, unit-tested; the page (pages/Deleted.tsx) calls them.

import type { ApiError } from './api';
import type { RestoreRequest } from './types';

/**
 * The restore's body: none when the field still holds the name the state had (the server
 * then restores it under that name), `{"name"}` for any other name typed there.
 */
export function restoreBody(had: string, typed: string): RestoreRequest | undefined {
  return typed === had ? undefined : { name: typed };
}

/** A refused restore of a state under `name`, in words, with the server's own. */
export function restoreRefusal(e: ApiError, name: string): string {
  switch (e.code) {
    case 'name_taken':
      return `The name ${name} is taken: a state has it now. Type a new name to restore it under (the server says: ${e.message}).`;
    case 'locked':
      return `A lock on ${name} is live, so it cannot be restored under that name now: ${e.message}.`;
    case 'invalid_name':
      return `The name is refused: ${e.message}.`;
    case 'not_found':
      return `This deleted state is no longer kept (restored or purged meanwhile): ${e.message}.`;
    default:
      return e.message;
  }
}

/** A refused purge, in words. */
export function purgeRefusal(e: ApiError): string {
  return e.code === 'not_found' ? `This deleted state is no longer kept (restored or purged meanwhile): ${e.message}.` : e.message;
}
