// How an Octo app's archives read on its pages: how a change ended in words, an archive's
// files split into Octo's state files and the journal (grouped by the command each came
// from, in the order the commands ran), and the addresses of the app pages. Pure functions,
// unit-tested.

import type { AppFile, ArchiveEnded } from './types';

/** How a change ended, in words. */
export function archiveEnded(e: ArchiveEnded | string): string {
  const words: Record<string, string> = {
    sealed: 'sealed',
    given_up: 'given up (unlock)',
    force_unlocked: 'force-unlocked',
  };
  return words[e] ?? e;
}

/** The journal files one command wrote, in the order the command ran. */
export interface CommandFiles {
  /** The command's ID: the time it started, then its own hex digits (`1791692243700-a690d91d`). */
  id: string;
  command: string;
  files: AppFile[];
}

/** The command ID in a journal file's name (`journal.<id>.<command>...json`), or null. */
export function commandId(name: string): string | null {
  return /^journal\.(\d+-[0-9a-f]+)\./.exec(name)?.[1] ?? null;
}

/** The time a command ID starts with, as an ISO date, or null when it is not one. */
export function commandStarted(id: string): string | null {
  const ms = Number(id.split('-')[0]);
  if (!Number.isSafeInteger(ms)) return null;
  const at = new Date(ms);
  return Number.isNaN(at.getTime()) ? null : at.toISOString();
}

/** Compares command IDs by their time first (the digits may differ in length), then the rest. */
function byId(a: string, b: string): number {
  const [ta, ra] = a.split('-');
  const [tb, rb] = b.split('-');
  if (ta.length !== tb.length) return ta.length - tb.length;
  return ta < tb ? -1 : ta > tb ? 1 : ra < rb ? -1 : ra > rb ? 1 : 0;
}

/** An archive's files: the state files by name, and the journal by command, oldest first. */
export function splitFiles(files: AppFile[]): { state: AppFile[]; journal: CommandFiles[] } {
  const state = files.filter((f) => f.kind !== 'journal').sort((a, b) => (a.name < b.name ? -1 : 1));
  const commands = new Map<string, CommandFiles>();
  for (const f of files.filter((f) => f.kind === 'journal')) {
    const id = commandId(f.name) ?? f.name;
    const group = commands.get(id) ?? { id, command: f.command ?? '', files: [] };
    group.files.push(f);
    commands.set(id, group);
  }
  const journal = [...commands.values()].sort((a, b) => byId(a.id, b.id));
  // Within a command: its steps first, then what Terraform printed, then the copies.
  const rank = (f: AppFile) => (f.name.endsWith(`.${f.command}.json`) ? 0 : f.name.endsWith('.terraform.json') ? 1 : 2);
  for (const group of journal) group.files.sort((a, b) => rank(a) - rank(b) || (a.name < b.name ? -1 : 1));
  return { state, journal };
}

/** What a journal file holds, by the form of its name (the spec's table of journal files). */
export function journalHolds(f: AppFile): string {
  if (f.name.endsWith('.terraform.json')) return 'what Terraform and Terragrunt printed';
  if (f.command && f.name.endsWith(`.${f.command}.json`)) return 'every step, and how it ended';
  return 'a copy of a state file it wrote';
}

/** The address of an app's page, or of one of its archives. */
export function appPath(name: string, commitId?: string): string {
  const base = `/apps/${encodeURIComponent(name)}`;
  return commitId === undefined ? base : `${base}/archives/${encodeURIComponent(commitId)}`;
}
