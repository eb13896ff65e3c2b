// A state's page: what each role is offered, every confirmation cancelled with nothing
// changed, a rollback that Terraform then plans and applies from, a download identical to
// the version, force unlock of Terraform's lock, and delete by typing the name; all by
// keyboard where a person would use it. And the versions table fits a 1280-pixel window.

import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser, Page } from 'playwright-core';

import { accessible, call, keyboardReachable, launch, open, screenshot, Server, signIn, startServer, stateDoc, tabTo, Tf, until } from './harness';

let server: Server;
let browser: Browser;
let tokens: { viewer: string; operator: string; admin: string };
let tf: Tf;
const TWO = 'two-' + 'x'.repeat(3000);

beforeAll(async () => {
  server = await startServer();
  browser = await launch();
  tokens = {
    viewer: server.token('acme', 'vera', 'viewer'),
    operator: server.token('acme', 'otto', 'operator'),
    admin: server.token('acme', 'ada', 'admin'),
  };
  // Three versions of `network`, written by Terraform: "one", a much larger "two-xxx…"
  // (the size chart shows the growth and the drop), "three".
  tf = new Tf(server, 'network', tokens.operator);
  tf.init();
  for (const value of ['one', TWO, 'three']) {
    tf.config(value);
    tf.run('apply', '-auto-approve', '-no-color');
  }
});

afterAll(async () => {
  await browser?.close();
  await server?.stop();
  tf?.remove();
});

async function openState(token: string, name = 'network'): Promise<{ page: Page; close: () => Promise<void>; problems: string[] }> {
  const { context, page, problems } = await open(browser, server);
  await signIn(page, token);
  await page.goto(`/states/${name}`);
  await page.getByRole('heading', { name: 'Versions' }).waitFor();
  // Closing checks that the page logged no error on the way (a CSP refusal would be one).
  const close = async () => {
    expect(problems).toEqual([]);
    await context.close();
  };
  return { page, problems, close };
}

const buttons = async (page: Page) =>
  (await page.locator('main button').allTextContents()).filter((t) => !['Copy', 'Copied'].includes(t));

const versions = async () => (await call(server, tokens.admin, 'GET', '/api/tf-states/network/versions')).json().versions;

describe('what each role is offered', () => {
  it('a viewer sees the state and its versions but no content action', async () => {
    const { page, close } = await openState(tokens.viewer);
    expect(await page.locator('table.versions tbody tr').count()).toBe(3);
    expect(await buttons(page)).toEqual([]);
    await close();
  });

  it('an operator sees download and roll back, not force unlock or delete', async () => {
    const { page, close } = await openState(tokens.operator);
    const offered = await buttons(page);
    expect(offered.filter((b) => b === 'Download').length).toBe(3);
    expect(offered.filter((b) => b === 'Roll back').length).toBe(2);
    expect(offered).not.toContain('Force unlock');
    expect(offered).not.toContain('Delete state');
    await close();
  });

  it('an admin sees delete, and force unlock (with the reason roll back is gone) while Terraform holds the lock', async () => {
    const { page, close } = await openState(tokens.admin);
    expect(await buttons(page)).toContain('Delete state');
    expect(await buttons(page)).not.toContain('Force unlock');
    await accessible(page, "a state's page");
    await keyboardReachable(page, "a state's page");
    await screenshot(page, 'state');
    const console = tf.holdLock();
    await until(async () => (await call(server, tokens.admin, 'GET', '/api/tf-states/network')).json().lock !== null);
    await page.reload();
    await page.getByRole('button', { name: 'Force unlock' }).waitFor();
    const offered = await buttons(page);
    expect(offered).not.toContain('Roll back');
    expect(offered).not.toContain('Delete state');
    expect(await page.locator('.reason').textContent()).toBe(
      'Roll back and delete are not offered while the state is locked: force unlock it first, or wait for its holder.',
    );
    const lock = page.locator('.lock-detail');
    expect(await lock.textContent()).toContain('otto');
    const lockId = (await call(server, tokens.admin, 'GET', '/api/tf-states/network')).json().lock.id;
    expect(await lock.textContent()).toContain(lockId);
    for (const field of ['Holder', 'Lock ID', 'Operation', 'Who', 'Info', 'Created', 'Since']) {
      expect(await lock.locator('dt').allTextContents()).toContain(field);
    }
    // Force unlock, by keyboard: cancelled first (the lock stays), then confirmed.
    await tabTo(page, 'Force unlock');
    await page.keyboard.press('Enter');
    const dialog = page.getByRole('dialog', { name: 'Force unlock network?' });
    await dialog.waitFor();
    expect(await dialog.textContent()).toContain(`lock ID ${lockId}`);
    expect(await dialog.textContent()).toContain("This also ends a run's hold on the state: that run's apply then refuses its plan if the state changed");
    await accessible(page, 'the force unlock dialog');
    await keyboardReachable(page, 'the force unlock dialog');
    await page.keyboard.press('Escape');
    await dialog.waitFor({ state: 'detached' });
    expect((await call(server, tokens.admin, 'GET', '/api/tf-states/network')).json().lock.id).toBe(lockId);
    await page.getByRole('button', { name: 'Force unlock' }).click();
    await page.getByRole('button', { name: 'Cancel' }).click();
    expect((await call(server, tokens.admin, 'GET', '/api/tf-states/network')).json().lock.id).toBe(lockId);
    await page.getByRole('button', { name: 'Force unlock' }).click();
    await dialog.getByRole('button', { name: 'Force unlock' }).click();
    await page.getByText('Force-unlocked: the state is free.').waitFor();
    expect((await call(server, tokens.admin, 'GET', '/api/tf-states/network')).json().lock).toBeNull();
    // The notice comes before the page has read the state again.
    await page.getByText('Unlocked.').waitFor();
    expect(await page.getByText('Unlocked.').count()).toBe(1);
    console.stdin!.end();
    await new Promise((ok) => console.once('exit', ok));
    await close();
  });
});

describe('actions', () => {
  it('downloads a version as <state>-v<version>.tfstate, byte for byte', async () => {
    const { page, close } = await openState(tokens.operator);
    const [download] = await Promise.all([
      page.waitForEvent('download'),
      page.getByRole('button', { name: 'Download version 2' }).click(),
    ]);
    expect(download.suggestedFilename()).toBe('network-v2.tfstate');
    const bytes = readFileSync((await download.path())!);
    const listed = (await versions()).find((v: { version: number }) => v.version === 2);
    expect(createHash('sha256').update(bytes).digest('hex')).toBe(listed.sha256);
    const served = await fetch(`${server.base}/api/tf-states/network/versions/2/content`, {
      headers: { Authorization: `Bearer ${tokens.operator}` },
    });
    expect(Buffer.compare(bytes, Buffer.from(await served.arrayBuffer()))).toBe(0);
    expect(JSON.parse(bytes.toString()).outputs.value.value).toBe(TWO);
    await close();
  });

  it('rolls back after a confirmation that can be cancelled, and Terraform continues from it', async () => {
    const { page, close } = await openState(tokens.operator);
    const before = (await versions()).length;
    await page.getByRole('button', { name: 'Roll back to version 1' }).click();
    const dialog = page.getByRole('dialog', { name: 'Roll back network to version 1?' });
    await dialog.waitFor();
    const text = await dialog.textContent();
    expect(text).toContain('This makes a new version, version 4, with the content of version 1 and a serial raised above the current one');
    expect(text).toContain('Plans saved before the rollback will be refused as stale');
    await accessible(page, 'the rollback dialog');
    await keyboardReachable(page, 'the rollback dialog');
    await screenshot(page, 'rollback');
    await dialog.getByRole('button', { name: 'Cancel' }).click();
    await dialog.waitFor({ state: 'detached' });
    expect((await versions()).length).toBe(before);
    // By keyboard this time, confirmed.
    await tabTo(page, 'Roll back to version 1');
    await page.keyboard.press('Enter');
    await dialog.waitFor();
    await page.keyboard.press('Tab');
    await page.keyboard.press('Enter');
    await page.getByText(/^Rolled back: version 4 has the content of version 1/).waitFor();
    const latest = (await versions())[0];
    expect(latest.version).toBe(4);
    expect(latest.source).toBe('rollback');
    // Terraform reads the rolled-back state: "one" is what it holds, so "one" plans nothing
    // and "four" applies on top of it.
    tf.config('one');
    expect(tf.run('plan', '-no-color')).toContain('No changes.');
    tf.config('four');
    const plan = tf.run('plan', '-no-color');
    expect(plan).toMatch(/"one" -> "four"/);
    tf.run('apply', '-auto-approve', '-no-color');
    expect((await versions())[0].version).toBe(5);
    await close();
  });

  it('deletes only once the state name is typed, and the cancelled dialog deletes nothing', async () => {
    const { page, close, problems } = await openState(tokens.admin);
    await page.getByRole('button', { name: 'Delete state' }).click();
    const dialog = page.getByRole('dialog', { name: 'Delete network?' });
    await dialog.waitFor();
    expect(await dialog.textContent()).toContain('network goes from the list with its 5 versions, and its name is free at once.');
    expect(await dialog.textContent()).toContain('an admin can restore it from the Deleted states page');
    const confirm = dialog.getByRole('button', { name: 'Delete state' });
    expect(await confirm.isDisabled()).toBe(true);
    await dialog.getByLabel("Type the state's name to confirm").fill('networ');
    expect(await confirm.isDisabled()).toBe(true);
    await accessible(page, 'the delete dialog');
    await keyboardReachable(page, 'the delete dialog');
    await dialog.getByRole('button', { name: 'Cancel' }).click();
    expect((await call(server, tokens.admin, 'GET', '/api/tf-states/network')).status).toBe(200);
    await page.getByRole('button', { name: 'Delete state' }).click();
    await dialog.getByLabel("Type the state's name to confirm").fill('network');
    await confirm.click();
    await page.getByRole('heading', { name: 'Terraform States' }).waitFor();
    expect((await call(server, tokens.admin, 'GET', '/api/tf-states/network')).status).toBe(404);
    expect(problems).toEqual([]);
    await close();
  });
});

describe('layout', () => {
  it('fits the versions table in a 1280-pixel-wide window: nothing scrolls sideways and the last column shows whole', async () => {
    // Several versions with the widest cells the table has: a run step as the writer, a
    // rollback's "(from version N)", and a row's `+a ~c -r` counts with its Changes button.
    const platform = server.platformToken();
    for (let serial = 1; serial <= 3; serial++) {
      const r = await call(server, tokens.operator, 'POST', '/api/tf-states/wide/state', stateDoc(serial, 'lin-wide', `v${serial}`));
      expect(r.status, r.text).toBe(200);
    }
    const minted = await call(server, platform, 'POST', '/api/runs/run-20260102-0042/tf-state-tokens', {
      org: 'acme',
      state: 'wide',
      step: 'apply-network',
      attempt: 12,
      kind: 'apply',
      timeout_seconds: 600,
      hold: false,
    });
    expect(minted.status, minted.text).toBe(201);
    const step = await fetch(`${server.base}/api/tf-states/wide/state`, {
      method: 'POST',
      headers: { Authorization: `Basic ${Buffer.from(`tester:${minted.json().token}`).toString('base64')}` },
      body: stateDoc(4, 'lin-wide', 'v4'),
    });
    expect(step.status, await step.text()).toBe(200);
    const rolled = await call(server, tokens.admin, 'POST', '/api/tf-states/wide/rollback', { version: 1 });
    expect(rolled.status, rolled.text).toBe(200);

    const { page, close } = await openState(tokens.admin, 'wide?changes=2');
    await page.setViewportSize({ width: 1280, height: 800 });
    await page.locator('table.versions tbody tr .counts').waitFor();
    expect(await page.locator('table.versions tbody tr').count()).toBe(5);
    const fit = await page.evaluate(() => {
      const root = document.scrollingElement!;
      const table = document.querySelector('table.versions')!;
      const box = table.parentElement!;
      const right = Math.min(root.clientWidth, box.getBoundingClientRect().right);
      const cut = [...table.querySelectorAll('tr > :last-child')]
        .map((cell) => ({ text: cell.textContent, rect: cell.getBoundingClientRect() }))
        .filter(({ rect }) => rect.left < 0 || rect.right > right + 0.5)
        .map(({ text, rect }) => `${text} (${Math.round(rect.left)} to ${Math.round(rect.right)})`);
      return {
        page: [root.scrollWidth, root.clientWidth],
        box: [box.scrollWidth, box.clientWidth],
        table: [table.scrollWidth, table.clientWidth],
        cut,
      };
    });
    expect(fit.page[0], 'the page scrolls sideways').toBeLessThanOrEqual(fit.page[1]);
    expect(fit.box[0], "the versions table's box scrolls sideways").toBeLessThanOrEqual(fit.box[1]);
    expect(fit.table[0], 'the versions table scrolls sideways').toBeLessThanOrEqual(fit.table[1]);
    expect(fit.cut, 'cells of the last column outside the window').toEqual([]);
    await accessible(page, 'a state with many versions at 1280 pixels');
    await keyboardReachable(page, 'a state with many versions at 1280 pixels');
    await close();
  });
});
