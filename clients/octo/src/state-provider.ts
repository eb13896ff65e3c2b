// Octo's state provider on Hegemony State: `getState(name)` and `saveState(name, data)`, the
// shape of the providers in Octo's own repository, over a local state folder (Octo's .octo/)
// and the app state on the server.
//
// Each octo command is its own process, so the folder is what carries a change from one to
// the next: it holds the work of this machine that no seal holds yet. A save writes the file
// there; under no lock (generate, validate) nothing is uploaded and the files wait for the
// next lock, which uploads them first; under a lock the uploader sends them every
// `checkInIntervalInSeconds` and the seal sends the last of them before it seals. After the
// seal (or the giving up) archives/<commitId>/ is written as the archive the server sealed,
// Octo's local copy of it: this machine's files move there, and what the archive carries from
// earlier changes that this machine never had is downloaded; if that fails, the change is
// sealed all the same, the files stay in the folder and the provider says so. The next lock
// then refuses while the folder holds a journal of a command that only runs under a lock,
// rather than upload that sealed change's files into a new one.
// A read takes the folder's copy, else the open change's (under a lock), else the newest
// seal: never the files of a change that another machine still has under way.

import { mkdir, readdir, readFile, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';

import type { AppStateClient, LockOptions } from './client.js';
import { NoStateError, OctoApiError, UnarchivedJournalError } from './errors.js';
import type { Archive, Lock } from './types.js';
import { sha256, Uploader, UploaderOptions } from './uploader.js';

export interface StateProviderOptions {
  client: AppStateClient;
  /** The local state folder (Octo's `.octo/`). */
  dir: string;
  /** The lock ID a command under the lock was given (`--lockId`); none for generate and validate. */
  lockId?: string;
  /** Seconds between uploads while a lock is held (10 by default, as Octo's). */
  checkInIntervalInSeconds?: number;
  /** Where "Failed to archive the state of commit" goes (stderr by default). */
  warn?: (message: string) => void;
}

/** A file of the state folder the server takes: what ends in `.tfstate` or `.json`. */
const isStateFile = (name: string) => /\.(tfstate|json)$/.test(name) && !name.startsWith('.');

/**
 * The commands that only run under a lock: each writes its journal only while one is held,
 * so a journal file of theirs in the folder with no lock held is a sealed change's that was
 * never archived. (generate and validate run under none; a lock that failed may leave its own.)
 */
const LOCKED_COMMANDS = new Set(['apply', 'commit', 'unlock']);

/** Whether `name` is a journal file (`journal.<id>.<command>...json`) of such a command. */
const isLockedJournal = (name: string) => {
  const parts = name.split('.');
  return parts[0] === 'journal' && parts.length >= 4 && LOCKED_COMMANDS.has(parts[2]);
};

export class OctoStateProvider {
  private lockIdHeld: string | undefined;
  private readonly client: AppStateClient;
  private readonly dir: string;
  private readonly interval: number;
  private readonly warn: (message: string) => void;
  private uploader: Uploader | null = null;

  constructor(options: StateProviderOptions) {
    this.client = options.client;
    this.dir = options.dir;
    this.lockIdHeld = options.lockId;
    this.interval = options.checkInIntervalInSeconds ?? 10;
    this.warn = options.warn ?? ((m) => process.stderr.write(m + '\n'));
  }

  /** The lock this provider works under, if any. */
  get lockId(): string | undefined {
    return this.lockIdHeld;
  }

  /** A state file's content; throws `NoStateError` when there is none anywhere. */
  async getState(name: string): Promise<Buffer> {
    const local = await readFile(join(this.dir, name)).catch((e: NodeJS.ErrnoException) => {
      if (e.code === 'ENOENT') return null;
      throw e;
    });
    if (local) return local;
    const remote = this.lockIdHeld
      ? await this.client.changeFile(this.lockIdHeld, name)
      : await this.client.sealedFile(name);
    if (!remote) throw new NoStateError(name);
    return remote;
  }

  /**
   * Saves a state file into the folder; under a lock, the next upload sends it. Written
   * beside and renamed over, so an upload never reads half a file.
   */
  async saveState(name: string, data: Buffer): Promise<void> {
    await mkdir(this.dir, { recursive: true });
    const partial = join(this.dir, `.${name}.${process.pid}.partial`);
    await writeFile(partial, data);
    await rename(partial, join(this.dir, name));
  }

  /**
   * Takes the lock (`octo lock`) and uploads what waits in the folder from generate and
   * validate. Refuses first, with `UnarchivedJournalError`, while the folder holds a journal
   * file of a command that only runs under a lock and no lock is held.
   */
  async lock(options: Omit<LockOptions, 'lockId'> = {}): Promise<Lock> {
    await this.refuseUnarchived();
    const lock = await this.client.lock(options);
    this.lockIdHeld = lock.lock_id;
    await this.sync();
    return lock;
  }

  /** Starts uploading every `checkInIntervalInSeconds` (`octo apply`); `stop()` on it sends the last copy. */
  async startUploads(tell: Pick<UploaderOptions, 'onError' | 'onUpload'> = {}): Promise<Uploader> {
    this.uploader = await this.newUploader(tell);
    return this.uploader.start();
  }

  /** Sends what changed since the last upload, now. */
  async sync(): Promise<void> {
    if (this.uploader) await this.uploader.tick();
    else await (await this.newUploader()).tick();
  }

  /** Uploads the last files, seals the change and releases the lock (`octo commit`'s end). */
  async seal(): Promise<Archive> {
    return this.finish((lockId) => this.client.seal(lockId));
  }

  /** Uploads the last files and gives the change up (`octo unlock`). */
  async unlock(): Promise<Archive> {
    return this.finish((lockId) => this.client.unlock(lockId));
  }

  private async finish(end: (lockId: string) => Promise<Archive>): Promise<Archive> {
    const lockId = this.held();
    if (this.uploader) await this.uploader.stop();
    else await this.sync();
    this.uploader = null;
    const archive = await end(lockId);
    this.lockIdHeld = undefined;
    try {
      await this.archiveLocally(archive);
    } catch (e) {
      this.warn(`Failed to archive the state of commit "${archive.commit_id}": ${(e as Error).message}`);
    }
    return archive;
  }

  /**
   * Writes archives/<commitId>/ as `archive` holds it. Every file is in place before any is
   * moved, so when one cannot be had every file of the folder stays where it was.
   */
  private async archiveLocally(archive: Archive): Promise<void> {
    const into = join(this.dir, 'archives', archive.commit_id);
    await mkdir(into, { recursive: true });
    const here = new Set(await this.files());
    const moves: string[] = [];
    for (const file of archive.files) {
      if (here.has(file.name) && sha256(await readFile(join(this.dir, file.name))) === file.sha256) {
        moves.push(file.name);
        continue;
      }
      // Carried from an earlier change, or changed here since it was sent: the sealed bytes.
      const content = await this.client.archiveFile(archive.commit_id, file.name);
      if (!content || sha256(content) !== file.sha256) {
        throw new Error(`the archive's ${file.name} could not be read as it was sealed`);
      }
      await writeFile(join(into, file.name), content);
    }
    for (const name of moves) await rename(join(this.dir, name), join(into, name));
  }

  private async refuseUnarchived(): Promise<void> {
    const left = (await this.files()).filter(isLockedJournal).sort();
    if (!left.length) return;
    // Under a lock still held (this machine's change under way) the files are that change's:
    // the lock below is refused as held, which says so.
    const view = await this.client.view().catch((e: unknown) => {
      if (e instanceof OctoApiError && e.status === 404) return null;
      throw e;
    });
    if (!view?.lock) throw new UnarchivedJournalError(left);
  }

  private held(): string {
    if (!this.lockIdHeld) throw new Error('no lock is held: lock first, or pass the lock ID');
    return this.lockIdHeld;
  }

  private async newUploader(tell: Pick<UploaderOptions, 'onError' | 'onUpload'> = {}): Promise<Uploader> {
    const lockId = this.held();
    const change = await this.client.change(lockId);
    const known = new Map(change.files.map((f) => [f.name, f.sha256]));
    return new Uploader(this.client, lockId, () => this.read(), {
      checkInIntervalInSeconds: this.interval,
      known,
      ...tell,
    });
  }

  private async files(): Promise<string[]> {
    const entries = await readdir(this.dir, { withFileTypes: true }).catch((e: NodeJS.ErrnoException) => {
      if (e.code === 'ENOENT') return [];
      throw e;
    });
    return entries.filter((e) => e.isFile() && isStateFile(e.name)).map((e) => e.name);
  }

  private async read(): Promise<Map<string, Buffer>> {
    const files = new Map<string, Buffer>();
    for (const name of await this.files()) files.set(name, await readFile(join(this.dir, name)));
    return files;
  }
}
