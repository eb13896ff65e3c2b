// An Octo app's pages: the list of apps reached from the navigation, an app's archives newest
// first (commit ID, how each change ended, who, when, its files with their sizes) beside the
// lock of a change under way, whose uploads no page shows, paged 20 at a time, and one
// archive's state files and journal by command, with downloads for an operator (byte for
// byte) and none for a viewer.

import { readFileSync } from 'node:fs';

import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { accessible, call, keyboardReachable, launch, open, screenshot, Server, signIn, startServer, stateDoc } from './harness';

let server: Server;
let browser: Browser;
let operator: string;
let viewer: string;
const sealed: string[] = [];
let open_: string;

const LINEAGE = '0b5e7c1a-aaaa-4bbb-8ccc-0123456789ab';
const journal = (command: string, entries: number) =>
  JSON.stringify({ command, entries: Array.from({ length: entries }, (_, i) => ({ type: i ? 'ModuleEvent' : 'CommandStartedEvent', payload: {} })) });

/** One change of the app `shop`: lock, upload `files`, then seal or give up (or leave it open). */
async function change(files: Record<string, string>, end: 'seal' | 'unlock' | null, who: string, app = 'shop'): Promise<string> {
  const lock = await call(server, operator, 'POST', `/api/apps/${app}/lock`, { who, info: 'receipts bucket' });
  expect(lock.status, lock.text).toBe(200);
  const { lock_id, commit_id } = lock.json();
  for (const [name, body] of Object.entries(files)) {
    const put = await call(server, operator, 'PUT', `/api/apps/${app}/locks/${lock_id}/files/${name}`, body);
    expect(put.status, `${name}: ${put.text}`).toBe(200);
  }
  if (end) {
    const done = await call(server, operator, 'POST', `/api/apps/${app}/locks/${lock_id}/${end}`);
    expect(done.status, done.text).toBe(200);
  }
  return commit_id;
}

beforeAll(async () => {
  server = await startServer();
  browser = await launch();
  operator = server.token('default', 'alice', 'operator');
  viewer = server.token('default', 'vera', 'viewer');
  // The spec's change: generate, validate, lock, apply, commit, then sealed.
  sealed.push(
    await change(
      {
        'checkout.tfstate': stateDoc(3, LINEAGE, 'receipts'),
        'models.json': JSON.stringify({ buckets: ['receipts'] }),
        'resources-actual.json': JSON.stringify({ receipts: { arn: 'arn:aws:s3:::receipts' } }),
        'resources-old.json': '{}',
        'journal.1791692243700-a690d91d.generate.json': journal('generate', 3),
        'journal.1791692243700-a690d91d.generate.f793c0d6cea01dba9aa521449489482f.json': JSON.stringify({ buckets: ['receipts'] }),
        'journal.1791692244187-30dd727f.validate.json': journal('validate', 4),
        'journal.1791692244187-30dd727f.validate.terraform.json': '[]',
        'journal.1791692253700-032b3e64.lock.json': journal('lock', 2),
        'journal.1791692257972-3e0cd513.apply.json': journal('apply', 40),
        'journal.1791692267354-d74b1acd.commit.json': journal('commit', 16),
      },
      'seal',
      'alice@laptop',
    ),
  );
  // Then a change given up after an apply.
  sealed.push(
    await change(
      { 'checkout.tfstate': stateDoc(4, LINEAGE, 'receipts-2'), 'journal.1791692300000-0000beef.apply.json': journal('apply', 7) },
      'unlock',
      'alice@ci',
    ),
  );
  // And one still under way: its upload must show nowhere.
  open_ = await change({ 'models.json': JSON.stringify({ buckets: ['receipts', 'under-way'] }) }, null, 'alice@ci');
});

afterAll(async () => {
  await browser?.close();
  await server?.stop();
});

async function appPage(token: string): Promise<{ page: Page; problems: string[]; close: () => Promise<void> }> {
  const { context, page, problems } = await open(browser, server);
  await signIn(page, token);
  await page.getByRole('navigation', { name: 'Sidebar' }).getByRole('link', { name: 'Octo apps' }).click();
  await page.getByRole('heading', { name: 'Octo apps' }).waitFor();
  await page.getByRole('link', { name: 'shop' }).click();
  await page.getByRole('heading', { name: 'Archives' }).waitFor();
  return { page, problems, close: () => context.close() };
}

describe('an app’s archives', () => {
  it('lists the apps, then the archives newest first with the open change only as its lock', async () => {
    const { context, page, problems } = await open(browser, server);
    await signIn(page, operator);
    await page.goto('/apps');
    const row = page.locator('table.apps tbody tr', { hasText: 'shop' });
    await row.first().waitFor();
    expect(await row.count()).toBe(1);
    const cells = await row.locator('th, td').allTextContents();
    expect(cells[0]).toBe('shop');
    expect(cells[1]).toContain(sealed[1]);
    expect(cells[1]).toContain('given up (unlock)');
    expect(cells[2]).toMatch(/^5 files, \d+ B$/);
    expect(cells[3]).toBe('2');
    expect(cells[4]).toMatch(/^Locked by alice, /);
    await accessible(page, 'the list of apps');
    expect(problems).toEqual([]);
    await context.close();

    const app = await appPage(operator);
    const rows = app.page.locator('table.archives tbody tr');
    expect(await rows.count()).toBe(2);
    const first = await rows.nth(0).locator('th, td').allTextContents();
    const second = await rows.nth(1).locator('th, td').allTextContents();
    expect(first[0]).toBe(`${sealed[1]}Newest`);
    expect(first[1]).toBe('given up (unlock)');
    expect(first[2]).toBe('alicealice@ci');
    expect(second[0]).toBe(sealed[0]);
    expect(second[1]).toBe('sealed');
    expect(second[2]).toBe('alicealice@laptop');
    expect(second[3]).toMatch(/ago|just now/);
    // Files with their sizes: each state file, then the journal by command.
    const sizes = await rows.nth(1).locator('ul.files li').allTextContents();
    expect(sizes.find((s) => s.startsWith('checkout.tfstate'))).toBe(`checkout.tfstate ${Buffer.byteLength(stateDoc(3, LINEAGE, 'receipts'))} B`);
    expect(sizes[sizes.length - 1]).toMatch(/^journal: 7 files of generate, validate, lock, apply, commit /);
    // The change under way is its lock, not an archive, and its upload is nowhere.
    const lock = app.page.locator('.lock-detail');
    expect(await lock.textContent()).toContain(open_);
    expect(await lock.textContent()).toContain('alice@ci');
    expect(await app.page.locator('table.archives').textContent()).not.toContain(open_);
    await accessible(app.page, "an app's archives");
    await keyboardReachable(app.page, "an app's archives");
    await screenshot(app.page, 'octo-archives');
    expect(app.problems).toEqual([]);
    await app.close();
  });

  it('pages through more archives than one page, newest first across pages', async () => {
    const made: string[] = [];
    for (let i = 0; i < 22; i++) made.push(await change({ 'models.json': JSON.stringify({ step: i }) }, 'seal', 'alice@ci', 'many'));
    const { context, page } = await open(browser, server);
    await signIn(page, operator);
    await page.goto('/apps/many');
    const ids = page.locator('table.archives tbody th a');
    await ids.first().waitFor();
    expect(await ids.allTextContents()).toEqual(made.slice(2).reverse());
    await page.getByRole('link', { name: 'Next page' }).click();
    await expect.poll(() => ids.allTextContents()).toEqual(made.slice(0, 2).reverse());
    expect(await page.getByRole('link', { name: 'Next page' }).count()).toBe(0);
    await page.getByRole('button', { name: 'Previous page' }).click();
    await expect.poll(() => ids.count()).toBe(20);
    await context.close();
  });
});

describe('one archive', () => {
  it('shows its state files and its journal by command, and an operator downloads a file byte for byte', async () => {
    const { page, problems, close } = await appPage(operator);
    await page.getByRole('link', { name: sealed[0] }).click();
    await page.getByRole('heading', { name: `Archive ${sealed[0]}` }).waitFor();
    const state = await page.locator('table.app-files tbody th').allTextContents();
    expect(state).toEqual(['checkout.tfstate', 'models.json', 'resources-actual.json', 'resources-old.json']);
    const serial = await page.locator('table.app-files tbody tr').first().locator('td').first().textContent();
    expect(serial).toBe('3');
    // Each command's cell: its name, then when it started.
    const commands = await page.locator('table.journal tbody th').evaluateAll((ths) => ths.map((th) => th.firstChild?.textContent));
    expect(commands).toEqual([
      'generate',
      'validate',
      'lock',
      'apply',
      'commit',
    ]);
    const files = await page.locator('table.journal tbody tr').evaluateAll((trs) =>
      trs.map((tr) => [...tr.querySelectorAll('td')].slice(0, 2).map((td) => td.textContent)),
    );
    expect(files.slice(0, 2)).toEqual([
      ['journal.1791692243700-a690d91d.generate.json', 'every step, and how it ended'],
      ['journal.1791692243700-a690d91d.generate.f793c0d6cea01dba9aa521449489482f.json', 'a copy of a state file it wrote'],
    ]);
    expect(files[3]).toEqual(['journal.1791692244187-30dd727f.validate.terraform.json', 'what Terraform and Terragrunt printed']);
    const [download] = await Promise.all([
      page.waitForEvent('download'),
      page.getByRole('button', { name: 'Download journal.1791692257972-3e0cd513.apply.json' }).click(),
    ]);
    expect(download.suggestedFilename()).toBe('journal.1791692257972-3e0cd513.apply.json');
    expect(readFileSync((await download.path())!, 'utf8')).toBe(journal('apply', 40));
    await accessible(page, 'an archive');
    await keyboardReachable(page, 'an archive');
    await screenshot(page, 'octo-archive');
    expect(problems).toEqual([]);
    await close();
  });

  it('a state file carried from an earlier change links to the archive that uploaded it', async () => {
    const { page, close } = await appPage(operator);
    await page.getByRole('link', { name: sealed[1] }).click();
    await page.getByRole('heading', { name: `Archive ${sealed[1]}` }).waitFor();
    expect(await page.locator('.badge.sealed').textContent()).toBe('Newest: the sealed state');
    const models = page.locator('table.app-files tbody tr', { hasText: 'models.json' });
    await models.getByRole('link', { name: sealed[0] }).waitFor();
    const tf = page.locator('table.app-files tbody tr', { hasText: 'checkout.tfstate' });
    expect(await tf.locator('td').allTextContents()).toContain('this change');
    await close();
  });

  it('a viewer sees the files but no download, and why', async () => {
    const { page, close } = await appPage(viewer);
    await page.getByRole('link', { name: sealed[0] }).click();
    await page.getByRole('heading', { name: `Archive ${sealed[0]}` }).waitFor();
    expect(await page.locator('table.journal tbody tr').count()).toBe(7);
    expect(await page.getByRole('button', { name: /^Download/ }).count()).toBe(0);
    expect(await page.locator('.reason').textContent()).toContain('your role (viewer) does not have it');
    const refused = await call(server, viewer, 'GET', `/api/apps/shop/archives/${sealed[0]}/files/models.json`);
    expect(refused.status).toBe(403);
    await close();
  });
});
