// The shapes the app-state API answers (docs/octo.md, "Shapes"), under the names this client
// exports: each is the type generated (api.gen.ts, `npm run types`) from the served OpenAPI
// document (docs/api/openapi.json), whose schemas the server derives from its Rust types.

import type * as api from './api.gen.js';

/** Who did something: a person's token, or the server's own tools. */
export type Actor = api.Actor;

/** A lock, as its holder sees it (the lock's answer, `GET .../locks/{lock_id}`). */
export type Lock = api.HeldAppLock;

/** A lock as everyone else sees it: without the lock ID, which is the holder's to pass. */
export type LockSeen = api.AppLock;

/** One file of a change or an archive: never its content. */
export type FileEntry = api.AppFile;

/** How a change ended. */
export type Ended = api.ArchiveEnded;

/** A sealed change. */
export type Archive = api.Archive;

/** The holder's view of its open change: what a seal would archive now. */
export type ChangeView = api.AppChange;

/** One page of an app's archives, newest first. */
export type ArchivePage = api.ArchiveList;

/** An app state: its lock (if any) and its newest archive (if any). */
export type AppView = api.AppView;
