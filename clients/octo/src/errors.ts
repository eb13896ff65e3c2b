// The errors the client throws: a refusal of the server's, with its status, code and words,
// the "no state" a state provider's reader expects when there is nothing sealed yet, and a
// lock refused on this machine because .octo/ holds a change's journal that was never archived.

import type { LockSeen } from './types.js';

/** A refusal from the server (`{"error": {"code", "message"}}`), or a call that never got an answer. */
export class OctoApiError extends Error {
  override readonly name = 'OctoApiError';

  constructor(
    /** The HTTP status; 0 when the server could not be reached. */
    readonly status: number,
    /** The server's error code (docs/octo.md, "Errors"): `app_locked`, `lock_id_mismatch`, ... */
    readonly code: string,
    message: string,
    /** For `app_locked`: the lock that is held, so the caller can say who has it and since when. */
    readonly lock: LockSeen | null = null,
  ) {
    super(message);
  }

  /** The error an answer carries; the status alone when its body is not the envelope. */
  static of(status: number, body: string): OctoApiError {
    try {
      const parsed = JSON.parse(body) as { error?: { code?: unknown; message?: unknown; lock?: LockSeen } };
      if (parsed?.error && typeof parsed.error.message === 'string') {
        return new OctoApiError(status, String(parsed.error.code ?? ''), parsed.error.message, parsed.error.lock ?? null);
      }
    } catch {
      // Not JSON (a proxy's page): the status is all there is.
    }
    return new OctoApiError(status, `http_${status}`, `the server answered ${status}`);
  }
}

/**
 * Nothing sealed under that name (and nothing waiting for the next lock): Octo's state
 * providers throw when there is no state, and Octo starts from an empty one. Octo tells this
 * error from every other by its message alone (`error.message === 'No state found!'`), so
 * the message is exactly that and the file it looked for is a property of its own.
 */
export class NoStateError extends Error {
  override readonly name = 'NoStateError';

  constructor(readonly file: string) {
    super('No state found!');
  }
}

/**
 * `octo lock` found, with no lock held, a journal file of a command that only runs under a
 * lock: the files of a change sealed without being archived on this machine (after "Failed
 * to archive the state of commit"). Taking the lock would upload them into the new change.
 */
export class UnarchivedJournalError extends Error {
  override readonly name = 'UnarchivedJournalError';

  constructor(
    /** Every such journal file in the state folder, in name (and so time) order. */
    readonly files: string[],
  ) {
    super(`State holds the journal of a run that was never archived: ${files[files.length - 1]}! Move or delete these files, then lock again.`);
  }
}
