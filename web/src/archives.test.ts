import { describe, expect, it } from 'vitest';

import { appPath, archiveEnded, commandId, commandStarted, journalHolds, splitFiles } from './archives';
import { pageOf } from './router';
import type { AppFile } from './types';

const file = (name: string, kind: AppFile['kind'], command?: string): AppFile => ({
  name,
  kind,
  command: command ?? null,
  size: 10,
  sha256: 'a'.repeat(64),
  uploaded_in: '1791692253600-5bbc6995',
  uploaded_at: '2026-10-01T12:31:02Z',
});

describe('an archive’s files', () => {
  // The spec's archive of one change, in the name order the server lists them.
  const files = [
    file('checkout.tfstate', 'tfstate'),
    file('journal.1791692243700-a690d91d.generate.f793c0d6cea01dba9aa521449489482f.json', 'journal', 'generate'),
    file('journal.1791692243700-a690d91d.generate.json', 'journal', 'generate'),
    file('journal.1791692244187-30dd727f.validate.json', 'journal', 'validate'),
    file('journal.1791692244187-30dd727f.validate.terraform.json', 'journal', 'validate'),
    file('journal.1791692253700-032b3e64.lock.json', 'journal', 'lock'),
    file('journal.1791692257972-3e0cd513.apply.json', 'journal', 'apply'),
    file('journal.1791692267354-d74b1acd.commit.json', 'journal', 'commit'),
    file('journal.999-00000001.apply.json', 'journal', 'apply'),
    file('models.json', 'json'),
    file('resources-actual.json', 'json'),
  ];

  it('splits state files from the journal, grouped by command in the order the commands ran', () => {
    const { state, journal } = splitFiles(files);
    expect(state.map((f) => f.name)).toEqual(['checkout.tfstate', 'models.json', 'resources-actual.json']);
    // 999 ms after 1970 came long before 1791692243700, though it sorts after it as text.
    expect(journal.map((g) => `${g.id} ${g.command}`)).toEqual([
      '999-00000001 apply',
      '1791692243700-a690d91d generate',
      '1791692244187-30dd727f validate',
      '1791692253700-032b3e64 lock',
      '1791692257972-3e0cd513 apply',
      '1791692267354-d74b1acd commit',
    ]);
    // A command's steps first, then a copy it wrote or Terraform's output.
    expect(journal[1].files.map((f) => f.name)).toEqual([
      'journal.1791692243700-a690d91d.generate.json',
      'journal.1791692243700-a690d91d.generate.f793c0d6cea01dba9aa521449489482f.json',
    ]);
    expect(journal[2].files.map((f) => journalHolds(f))).toEqual([
      'every step, and how it ended',
      'what Terraform and Terragrunt printed',
    ]);
    expect(journalHolds(journal[1].files[1])).toBe('a copy of a state file it wrote');
  });

  it('reads a command’s ID and when it started from a journal file’s name', () => {
    expect(commandId('journal.1791692253700-032b3e64.lock.json')).toBe('1791692253700-032b3e64');
    expect(commandId('models.json')).toBeNull();
    expect(commandStarted('1791692253700-032b3e64')).toBe('2026-10-11T04:17:33.700Z');
    expect(commandStarted('99999999999999999999-00')).toBeNull();
  });

  it('says how a change ended in words', () => {
    expect(['sealed', 'given_up', 'force_unlocked', 'other'].map(archiveEnded)).toEqual([
      'sealed',
      'given up (unlock)',
      'force-unlocked',
      'other',
    ]);
  });
});

describe('the app pages’ addresses', () => {
  it('round-trip through the router', () => {
    expect(pageOf('/apps')).toEqual({ page: 'apps' });
    expect(pageOf(appPath('shop'))).toEqual({ page: 'app', name: 'shop' });
    expect(pageOf(appPath('shop.v2', '1791692253600-5bbc6995'))).toEqual({
      page: 'archive',
      name: 'shop.v2',
      commitId: '1791692253600-5bbc6995',
    });
    expect(pageOf('/apps/%E0')).toEqual({ page: 'missing' });
    expect(pageOf('/apps/shop/archives')).toEqual({ page: 'missing' });
  });
});
