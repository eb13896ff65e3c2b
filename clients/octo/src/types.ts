// The shapes the app-state API answers (docs/octo.md, "Shapes"), as this client reads them.

/** Who did something: a person's token, or the server's own tools. */
export type Actor = { kind: 'user'; user: string } | { kind: string; [field: string]: unknown };

/** A lock, as its holder sees it (the lock's answer, `GET .../locks/{lock_id}`). */
export interface Lock {
  lock_id: string;
  commit_id: string;
  holder: Actor;
  who: string;
  info: string;
  since: string;
}

/** A lock as everyone else sees it: without the lock ID, which is the holder's to pass. */
export type LockSeen = Omit<Lock, 'lock_id'>;

/** One file of a change or an archive: never its content. */
export interface FileEntry {
  name: string;
  kind: 'tfstate' | 'journal' | 'json';
  /** The command a journal file came from; journal files only. */
  command?: string;
  size: number;
  sha256: string;
  uploaded_in: string;
  uploaded_at: string;
  lineage?: string;
  serial?: number;
}

/** How a change ended. */
export type Ended = 'sealed' | 'given_up' | 'force_unlocked';

/** A sealed change. */
export interface Archive {
  commit_id: string;
  ended: Ended;
  holder: Actor;
  who: string;
  info: string;
  locked_at: string;
  sealed_at: string;
  sealed_by: Actor;
  size: number;
  files: FileEntry[];
}

/** The holder's view of its open change: what a seal would archive now. */
export interface ChangeView {
  lock: Lock;
  files: FileEntry[];
}

/** One page of an app's archives, newest first. */
export interface ArchivePage {
  app: string;
  archives: Archive[];
  next_cursor: string | null;
}

/** An app state: its lock (if any) and its newest archive (if any). */
export interface AppView {
  name: string;
  lock: LockSeen | null;
  newest: Archive | null;
  archives: number;
  allowed_actions?: Record<string, boolean>;
}
