// The app-state API of one app (docs/octo.md), over Node's own fetch: the lock, uploads under
// it, the seal or the giving up, and the reads. Every call is safe to send again, so each one
// is retried on 429 and 5xx (and on a connection that failed) with exponential backoff,
// waiting at least what a Retry-After header asks; the lock is made safe to retry by sending
// a lock ID of the client's own.

import { randomUUID } from 'node:crypto';

import { OctoApiError } from './errors.js';
import type { AppView, Archive, ArchivePage, ChangeView, FileEntry, Lock } from './types.js';

/** How calls are retried. */
export interface RetryPolicy {
  /** Attempts in all, the first included (default 6). */
  attempts: number;
  /** The first wait, doubled at each retry (default 250 ms). */
  baseDelayMs: number;
  /** The longest wait the backoff makes (default 8 s); a longer Retry-After is still honoured, up to `maxRetryAfterMs`. */
  maxDelayMs: number;
  /** The longest Retry-After honoured (default 60 s): a longer one fails the call at once. */
  maxRetryAfterMs: number;
}

export interface ClientOptions {
  /** The server's address, e.g. `https://state.example.com`. */
  baseUrl: string;
  /** A personal access token (operator, to lock and upload; viewer reads the lists). */
  token: string;
  /** The app state's name: one per Octo app. */
  app: string;
  retry?: Partial<RetryPolicy>;
}

/** What a lock says about who holds it (each optional; at most 1024 characters each). */
export interface LockOptions {
  /** The lock ID to take the lock with; by default a new one. */
  lockId?: string;
  who?: string;
  info?: string;
}

/** Files to upload: name to content. */
export type Files = Record<string, Buffer | string> | Map<string, Buffer | string>;

const DEFAULTS: RetryPolicy = { attempts: 6, baseDelayMs: 250, maxDelayMs: 8000, maxRetryAfterMs: 60_000 };

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** The wait a Retry-After header asks for, in milliseconds (seconds or an HTTP date), if any. */
export function retryAfterMs(header: string | null, now: number = Date.now()): number | null {
  if (header === null || header.trim() === '') return null;
  const trimmed = header.trim();
  if (/^\d+$/.test(trimmed)) return Number(trimmed) * 1000;
  const at = Date.parse(trimmed);
  return Number.isNaN(at) ? null : Math.max(0, at - now);
}

/** The wait before retry number `retry` (1 for the first): doubling, capped, with jitter. */
export function backoffMs(retry: number, policy: RetryPolicy, random: () => number = Math.random): number {
  const ceiling = Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** (retry - 1));
  // Half fixed, half random: calls that failed together do not all come back together.
  return Math.round(ceiling / 2 + (ceiling / 2) * random());
}

const retryable = (status: number) => status === 429 || status >= 500;

export class AppStateClient {
  readonly app: string;
  private readonly base: string;
  private readonly token: string;
  private readonly policy: RetryPolicy;

  constructor(options: ClientOptions) {
    this.base = options.baseUrl.replace(/\/+$/, '');
    this.token = options.token;
    this.app = options.app;
    this.policy = { ...DEFAULTS, ...options.retry };
  }

  /** Takes the lock: starts a change. A held lock refuses with `app_locked` (423), naming its holder. */
  async lock(options: LockOptions = {}): Promise<Lock> {
    const body = { lock_id: options.lockId ?? randomUUID(), who: options.who, info: options.info };
    return this.json<Lock>('POST', this.path('lock'), JSON.stringify(body));
  }

  /** Uploads each file to the open change, one request each, in the order given. */
  async upload(lockId: string, files: Files): Promise<FileEntry[]> {
    const entries = files instanceof Map ? [...files.entries()] : Object.entries(files);
    const uploaded: FileEntry[] = [];
    for (const [name, content] of entries) {
      uploaded.push(await this.json<FileEntry>('PUT', this.path('locks', lockId, 'files', name), content));
    }
    return uploaded;
  }

  /** Seals the change as the app's newest archive and releases the lock, in one step. */
  async seal(lockId: string): Promise<Archive> {
    return this.json<Archive>('POST', this.path('locks', lockId, 'seal'));
  }

  /** Gives the change up: what it uploaded is sealed, marked `given_up`, and the lock released. */
  async unlock(lockId: string): Promise<Archive> {
    return this.json<Archive>('POST', this.path('locks', lockId, 'unlock'));
  }

  /** The holder's view of its open change. */
  async change(lockId: string): Promise<ChangeView> {
    return this.json<ChangeView>('GET', this.path('locks', lockId));
  }

  /** The app state: its lock and newest archive. */
  async view(): Promise<AppView> {
    return this.json<AppView>('GET', this.path());
  }

  /** One page of the archives, newest first. */
  async archives(options: { limit?: number; cursor?: string } = {}): Promise<ArchivePage> {
    const query = new URLSearchParams();
    if (options.limit !== undefined) query.set('limit', String(options.limit));
    if (options.cursor !== undefined) query.set('cursor', options.cursor);
    const q = query.size ? `?${query}` : '';
    return this.json<ArchivePage>('GET', this.path('archives') + q);
  }

  /** One archive's files (never their content). */
  async archive(commitId: string): Promise<Archive> {
    return this.json<Archive>('GET', this.path('archives', commitId));
  }

  /** A file of the newest archive (the sealed state), or null when there is none. */
  async sealedFile(name: string): Promise<Buffer | null> {
    return this.bytes(this.path('files', name));
  }

  /** A file as the open change has it (its upload, else the newest archive's), or null. */
  async changeFile(lockId: string, name: string): Promise<Buffer | null> {
    return this.bytes(this.path('locks', lockId, 'files', name));
  }

  /** A file of one archive, or null. */
  async archiveFile(commitId: string, name: string): Promise<Buffer | null> {
    return this.bytes(this.path('archives', commitId, 'files', name));
  }

  private path(...segments: string[]): string {
    return ['/api/apps', this.app, ...segments].map((s, i) => (i === 0 ? s : encodeURIComponent(s))).join('/');
  }

  private async json<T>(method: string, path: string, body?: Buffer | string): Promise<T> {
    const response = await this.send(method, path, body);
    const text = await response.text();
    if (!response.ok) throw OctoApiError.of(response.status, text);
    return JSON.parse(text) as T;
  }

  /** A file's bytes; null for a 404 (no such file, or nothing sealed yet). */
  private async bytes(path: string): Promise<Buffer | null> {
    const response = await this.send('GET', path);
    if (response.status === 404) {
      await response.arrayBuffer();
      return null;
    }
    if (!response.ok) throw OctoApiError.of(response.status, await response.text());
    return Buffer.from(await response.arrayBuffer());
  }

  /** One call, retried while the answer is 429 or 5xx or no answer came, up to the policy's attempts. */
  private async send(method: string, path: string, body?: Buffer | string): Promise<Response> {
    const headers: Record<string, string> = { Authorization: `Bearer ${this.token}` };
    if (body !== undefined) headers['Content-Type'] = 'application/json';
    const payload = typeof body === 'string' || body === undefined ? body : new Uint8Array(body);
    for (let attempt = 1; ; attempt++) {
      const last = attempt >= this.policy.attempts;
      let response: Response;
      try {
        response = await fetch(this.base + path, { method, headers, body: payload });
      } catch (e) {
        if (last) {
          throw new OctoApiError(0, 'unreachable', `${method} ${path} did not reach the server: ${(e as Error).message}`);
        }
        await sleep(backoffMs(attempt, this.policy));
        continue;
      }
      if (!retryable(response.status) || last) return response;
      const asked = retryAfterMs(response.headers.get('Retry-After'));
      if (asked !== null && asked > this.policy.maxRetryAfterMs) return response;
      // Read the refused answer to its end, so its connection can be used again.
      await response.arrayBuffer();
      await sleep(Math.max(asked ?? 0, backoffMs(attempt, this.policy)));
    }
  }
}
