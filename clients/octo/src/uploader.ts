// Uploads on an interval: Octo copies each module's Terraform state into its state folder
// every `checkInIntervalInSeconds` while an apply runs and once more when it stops, and with
// remote state each copy is uploaded. An uploader sends, at each tick, every file whose bytes
// changed since the server last had them (by SHA-256), so a tick with nothing new sends
// nothing; ticks never overlap, and `stop` sends the last copy.

import { createHash } from 'node:crypto';

import type { AppStateClient } from './client.js';
import type { FileEntry } from './types.js';

/** Where the files come from at each tick: name to content. */
export type FileSource = () => Promise<Map<string, Buffer>>;

export interface UploaderOptions {
  /** Seconds between ticks (Octo's `checkInIntervalInSeconds`; 10 by default). */
  checkInIntervalInSeconds?: number;
  /** The SHA-256 of each file the change already holds, so those are not sent again. */
  known?: Map<string, string>;
  /** Told of a tick that failed (the next tick tries again; `stop` throws if its own fails). */
  onError?: (error: Error) => void;
  /** Told of each tick that sent something, with what the server answered for each file. */
  onUpload?: (sent: FileEntry[]) => void;
}

export const sha256 = (data: Buffer): string => createHash('sha256').update(data).digest('hex');

export class Uploader {
  /** Files sent so far, one per request that succeeded. */
  uploads = 0;
  /** The error of the last tick that failed, cleared by one that succeeds. */
  lastError: Error | null = null;
  private readonly known: Map<string, string>;
  private readonly intervalMs: number;
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<FileEntry[]> | null = null;
  private stopped = false;

  constructor(
    private readonly client: AppStateClient,
    private readonly lockId: string,
    private readonly source: FileSource,
    private readonly options: UploaderOptions = {},
  ) {
    const seconds = options.checkInIntervalInSeconds ?? 10;
    if (!(seconds > 0)) throw new RangeError('checkInIntervalInSeconds must be more than 0');
    this.intervalMs = seconds * 1000;
    this.known = new Map(options.known ?? []);
  }

  /** Starts ticking: the first upload one interval from now. */
  start(): this {
    this.schedule();
    return this;
  }

  /** Sends what changed since the last upload; waits for a tick already under way first. */
  async tick(): Promise<FileEntry[]> {
    while (this.running) await this.running.catch(() => undefined);
    this.running = this.send();
    try {
      const sent = await this.running;
      this.lastError = null;
      if (sent.length) this.options.onUpload?.(sent);
      return sent;
    } finally {
      this.running = null;
    }
  }

  /** Stops ticking and sends the last copy; throws when that upload fails. */
  async stop(): Promise<FileEntry[]> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    return this.tick();
  }

  private schedule() {
    if (this.stopped) return;
    this.timer = setTimeout(async () => {
      try {
        await this.tick();
      } catch (e) {
        this.lastError = e as Error;
        this.options.onError?.(e as Error);
      }
      this.schedule();
    }, this.intervalMs);
  }

  private async send(): Promise<FileEntry[]> {
    const files = await this.source();
    const sent: FileEntry[] = [];
    for (const [name, content] of [...files.entries()].sort(([a], [b]) => a.localeCompare(b))) {
      const digest = sha256(content);
      if (this.known.get(name) === digest) continue;
      const [entry] = await this.client.upload(this.lockId, new Map([[name, content]]));
      this.known.set(name, digest);
      this.uploads += 1;
      sent.push(entry);
    }
    return sent;
  }
}
