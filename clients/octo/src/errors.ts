// The errors the client throws: a refusal of the server's, with its status, code and words,
// and the "no state" a state provider's reader expects when there is nothing sealed yet.

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
 * providers throw when there is no state, and Octo starts from an empty one.
 */
export class NoStateError extends Error {
  override readonly name = 'NoStateError';

  constructor(readonly file: string) {
    super(`No state found! (${file})`);
  }
}
