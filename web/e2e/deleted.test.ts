// The Deleted states page (admins): a state Terraform wrote, deleted from its page, listed
// with who deleted it, its versions, size and purge date; restored under its name (back in
// the list, and Terraform plans no changes), deleted again, its name taken by a new state, so
// a restore under it is refused in words next to the row, and restored under a new name
// instead; a purge only once the name is typed, which removes the row; the empty page; a
// viewer and an operator neither offered the page nor shown it. Axe-clean and keyboard-usable.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser, Page } from 'playwright-core';

import { accessible, call, keyboardReachable, launch, open, screenshot, Server, signIn, startServer, stateDoc, Tf } from './harness';

let server: Server;
let browser: Browser;
let admin: string;
let tf: Tf;

beforeAll(async () => {
  server = await startServer();
  browser = await launch();
  admin = server.token('acme', 'ada', 'admin');
  tf = new Tf(server, 'network', admin);
  tf.init();
  tf.run('apply', '-auto-approve', '-no-color');
  tf.config('two');
  tf.run('apply', '-auto-approve', '-no-color');
});

afterAll(async () => {
  await browser?.close();
  await server?.stop();
  tf?.remove();
});

async function signedIn(token: string): Promise<{ page: Page; close: () => Promise<void> }> {
  const { context, page, problems } = await open(browser, server);
  await signIn(page, token);
  const close = async () => {
    expect(problems).toEqual([]);
    await context.close();
  };
  return { page, close };
}

/** Deletes `name` from its page, typing the name in the confirmation. */
async function deleteFromPage(page: Page, name: string) {
  await page.goto(`/states/${name}`);
  await page.getByRole('button', { name: 'Delete state' }).click();
  const dialog = page.getByRole('dialog', { name: `Delete ${name}?` });
  await dialog.getByLabel("Type the state's name to confirm").fill(name);
  await dialog.getByRole('button', { name: 'Delete state' }).click();
  await page.getByRole('heading', { name: 'Terraform States' }).waitFor();
}

/** Opens the Deleted states page from the sidebar. */
async function openDeleted(page: Page) {
  await page.getByRole('navigation', { name: 'Sidebar' }).getByRole('link', { name: 'Deleted states' }).click();
  await page.getByRole('heading', { name: 'Deleted states', level: 1 }).waitFor();
}

const rows = (page: Page) => page.locator('table.deleted tbody tr');
const row = (page: Page, name: string) => rows(page).filter({ has: page.getByRole('rowheader', { name, exact: true }) });

describe('deleted states', () => {
  it('says nothing is kept, and for how long a deleted state would be', async () => {
    const { page, close } = await signedIn(admin);
    await openDeleted(page);
    await page.getByText('No deleted state is kept now. A deleted state is kept for the server\'s retention').waitFor();
    expect(await page.textContent('main')).toContain('HEGEMONY_TF_STATE_DELETED_RETENTION_DAYS (7 days unless set; 0 keeps none)');
    await accessible(page, 'the empty deleted states page');
    await close();
  });

  it('lists a state deleted from its page and restores it under its name, where Terraform finds it unchanged', async () => {
    const { page, close } = await signedIn(admin);
    await deleteFromPage(page, 'network');
    expect((await call(server, admin, 'GET', '/api/tf-states/network')).status).toBe(404);
    await openDeleted(page);
    const network = row(page, 'network');
    await expect.poll(() => network.count()).toBe(1);
    const cells = await network.locator('td').allTextContents();
    expect(cells[0]).toBe('just now by ada');
    expect(cells[1]).toBe('2');
    expect(cells[2]).toMatch(/^\d+(\.\d)? (B|KiB)$/);
    expect(cells[3]).toBe('in 7 days');
    await accessible(page, 'the deleted states page');
    await keyboardReachable(page, 'the deleted states page');
    await screenshot(page, 'deleted-states');

    expect(await network.getByLabel('Name to restore network under').inputValue()).toBe('network');
    await network.getByRole('button', { name: 'Restore' }).click();
    const notice = page.getByRole('status');
    await expect.poll(() => notice.textContent()).toBe('Restored network: 2 versions, version 2 current. Open network');
    await page.getByText('No deleted state is kept now.').waitFor();
    await page.getByRole('link', { name: 'Open network' }).click();
    await page.getByRole('heading', { name: 'network', level: 1 }).waitFor();
    await page.getByRole('navigation', { name: 'Sidebar' }).getByRole('link', { name: 'Terraform States' }).click();
    await page.getByRole('link', { name: 'network', exact: true }).waitFor();
    // Terraform continues from the restored state as if it had never gone.
    expect(tf.run('plan', '-no-color', '-detailed-exitcode')).toContain('No changes.');
    await close();
  });

  it('refuses a restore under a name a new state took, in words next to the row, and restores under a new name', async () => {
    const { page, close } = await signedIn(admin);
    await deleteFromPage(page, 'network');
    expect((await call(server, admin, 'POST', '/api/tf-states/network/import', stateDoc(1, 'newcomer', 'new'))).status).toBe(201);
    await openDeleted(page);
    const network = row(page, 'network');
    await network.getByRole('button', { name: 'Restore' }).click();
    const refusal = network.getByRole('alert');
    await expect
      .poll(() => refusal.textContent())
      .toMatch(/^The name network is taken: a state has it now\. Type a new name to restore it under \(the server says: state network exists: .+\)\.$/);
    expect(await network.getByLabel('Name to restore network under').getAttribute('aria-describedby')).toBe(await refusal.getAttribute('id'));
    await accessible(page, 'a refused restore');
    expect((await call(server, admin, 'GET', '/api/tf-states/network')).json().lineage).toBe('newcomer');

    // A name the rule refuses is said as it is typed, and cannot be sent.
    const field = network.getByLabel('Name to restore network under');
    await field.fill('network/old');
    await network.getByText("A state name may only hold A-Z, a-z, 0-9, '.', '_' and '-'; found '/'.").waitFor();
    expect(await network.getByRole('button', { name: 'Restore' }).isDisabled()).toBe(true);
    await field.fill('network-old');
    expect(await network.getByRole('alert').count()).toBe(0);
    await network.getByRole('button', { name: 'Restore' }).click();
    await expect.poll(() => page.getByRole('status').textContent()).toBe('Restored network-old: 2 versions, version 2 current. Open network-old');
    await expect.poll(() => rows(page).count()).toBe(0);
    await page.getByRole('link', { name: 'Open network-old' }).click();
    await page.getByRole('heading', { name: 'network-old', level: 1 }).waitFor();
    const old = (await call(server, admin, 'GET', '/api/tf-states/network-old')).json();
    expect(old.latest_version).toBe(2);
    expect((await call(server, admin, 'GET', '/api/tf-states/network')).json().lineage).toBe('newcomer');
    await close();
  });

  it('purges only once the name is typed, and the row goes', async () => {
    for (const name of ['scratch', 'keep']) {
      expect((await call(server, admin, 'POST', `/api/tf-states/${name}/import`, stateDoc(1, name, 'v'))).status).toBe(201);
      expect((await call(server, admin, 'DELETE', `/api/tf-states/${name}`)).status).toBe(204);
    }
    const { page, close } = await signedIn(admin);
    await openDeleted(page);
    await expect.poll(() => rows(page).count()).toBe(2);
    await row(page, 'scratch').getByRole('button', { name: 'Purge now' }).click();
    const dialog = page.getByRole('dialog', { name: 'Purge scratch now?' });
    await dialog.waitFor();
    expect(await dialog.textContent()).toContain('Its 1 version goes now instead of in 7 days, and it can no longer be restored.');
    const confirm = dialog.getByRole('button', { name: 'Purge now' });
    expect(await confirm.isDisabled()).toBe(true);
    await dialog.getByLabel("Type the state's name to confirm").fill('scratc');
    expect(await confirm.isDisabled()).toBe(true);
    await accessible(page, 'the purge confirmation');
    await keyboardReachable(page, 'the purge confirmation');
    await dialog.getByRole('button', { name: 'Cancel' }).click();
    await expect.poll(() => dialog.count()).toBe(0);
    expect((await call(server, admin, 'GET', '/api/deleted-states')).json().deleted_states).toHaveLength(2);

    await row(page, 'scratch').getByRole('button', { name: 'Purge now' }).click();
    // Opened again, the dialog starts empty.
    expect(await dialog.getByLabel("Type the state's name to confirm").inputValue()).toBe('');
    await dialog.getByLabel("Type the state's name to confirm").fill('scratch');
    await confirm.click();
    await expect
      .poll(() => page.getByRole('status').textContent())
      .toBe('Purged scratch: its versions are deleted, and it can no longer be restored.');
    await expect.poll(() => rows(page).count()).toBe(1);
    expect(await row(page, 'keep').count()).toBe(1);
    const kept = (await call(server, admin, 'GET', '/api/deleted-states')).json().deleted_states;
    expect(kept.map((d: { name: string }) => d.name)).toEqual(['keep']);
    await close();
  });

  it('is neither offered to a viewer or an operator nor shown to them when opened anyway', async () => {
    for (const [user, role] of [
      ['vera', 'viewer'],
      ['otto', 'operator'],
    ] as const) {
      const { page, close } = await signedIn(server.token('acme', user, role));
      expect(await page.getByRole('link', { name: 'Deleted states' }).count()).toBe(0);
      await page.goto('/deleted-states');
      await page.getByText(`Deleted states need the admin role; yours is ${role}.`).waitFor();
      expect(await page.locator('table').count()).toBe(0);
      await accessible(page, `the deleted states page refusing a ${role}`);
      await close();
    }
  });
});
