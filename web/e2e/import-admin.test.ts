// Import (pick or drop a file, the name checked as one types, a progress bar, refusals in
// words), and the admin pages: the audit log, paged and filtered, and permissions changed
// after a confirmation that says who gains or loses what.

import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser } from 'playwright-core';

import { accessible, call, keyboardReachable, launch, open, screenshot, Server, signIn, startServer, stateDoc, tabTo } from './harness';

const LIMIT = 1024 * 1024;
let server: Server;
let browser: Browser;
let admin: string;
const files = mkdtempSync(join(tmpdir(), 'hegemony-import-'));

/** A state file of about `size` bytes. */
function stateFile(name: string, size: number, lineage = 'lin-' + name): string {
  const path = join(files, name);
  const doc = stateDoc(7, lineage, 'x'.repeat(Math.max(1, size - 200)));
  writeFileSync(path, doc);
  return path;
}

beforeAll(async () => {
  server = await startServer({ HEGEMONY_TF_STATE_MAX_BYTES: String(LIMIT) });
  browser = await launch();
  admin = server.token('acme', 'ada', 'admin');
});

afterAll(async () => {
  await browser?.close();
  await server?.stop();
});

describe('import', () => {
  it('uploads a picked file with a progress bar, names it from the file, and opens the new state', async () => {
    const { context, page, problems } = await open(browser, server);
    await signIn(page, admin);
    await page.getByRole('link', { name: 'Import state', exact: true }).first().click();
    await page.getByRole('heading', { name: 'Import state' }).waitFor();
    await page.getByLabel('State file (or drop it here)').setInputFiles(stateFile('billing.tfstate', 900 * 1024));
    const name = page.getByLabel('Name of the new state');
    expect(await name.inputValue()).toBe('billing');
    // The name is checked as it is typed.
    await name.fill('bad/name');
    await page.getByText("A state name may only hold A-Z, a-z, 0-9, '.', '_' and '-'; found '/'.").waitFor();
    expect(await page.getByRole('button', { name: 'Import' }).isDisabled()).toBe(true);
    expect(await name.getAttribute('aria-invalid')).toBe('true');
    await name.fill('billing');
    await accessible(page, 'the import page');
    await keyboardReachable(page, 'the import page');
    await screenshot(page, 'import');
    // A slow link, so the progress bar is seen moving.
    const cdp = await context.newCDPSession(page);
    await cdp.send('Network.enable');
    await cdp.send('Network.emulateNetworkConditions', { offline: false, latency: 0, downloadThroughput: -1, uploadThroughput: 400 * 1024 });
    await page.getByRole('button', { name: 'Import' }).click();
    const bar = page.locator('progress');
    await bar.waitFor();
    const max = Number(await bar.getAttribute('max'));
    expect(max).toBeGreaterThan(900_000);
    // Part of the file sent, not all of it: the bar moves while the upload runs.
    await expect.poll(async () => {
      const sent = await bar.evaluate((b) => (b as HTMLProgressElement).value).catch(() => 0);
      return sent > 0 && sent < max;
    }).toBe(true);
    await page.getByRole('heading', { name: 'billing', level: 1 }).waitFor();
    await cdp.send('Network.emulateNetworkConditions', { offline: false, latency: 0, downloadThroughput: -1, uploadThroughput: -1 });
    await page.getByText('Imported. Use it with this backend.hcl:').waitFor();
    expect(await page.getByLabel('backend.hcl of the imported state', { exact: true }).textContent()).toContain(
      `${server.base}/api/tf-states/billing/state`,
    );
    const state = (await call(server, admin, 'GET', '/api/tf-states/billing')).json();
    expect(state.serial).toBe(7);
    expect(state.lineage).toBe('lin-billing.tfstate');
    expect(problems).toEqual([]);
    await context.close();
  });

  it('takes a dropped file too, and refuses a taken name, a non-state file and a file over the limit in words', async () => {
    const { context, page } = await open(browser, server);
    await signIn(page, admin);
    await page.goto('/import');
    await page.getByRole('heading', { name: 'Import state' }).waitFor();
    const drop = async (fileName: string, content: string) =>
      page.evaluate(
        ([n, c]) => {
          const data = new DataTransfer();
          data.items.add(new File([c], n, { type: 'application/json' }));
          document.querySelector('.drop')!.dispatchEvent(new DragEvent('drop', { dataTransfer: data, bubbles: true, cancelable: true }));
        },
        [fileName, content],
      );
    await drop('billing.json', stateDoc(1, 'other', 'y'));
    expect(await page.getByLabel('Name of the new state').inputValue()).toBe('billing');
    await page.getByRole('button', { name: 'Import' }).click();
    const alert = page.getByRole('alert');
    await expect
      .poll(() => alert.textContent())
      .toBe('A state named billing already exists: choose another name (an import only creates a new state).');
    await drop('notes.json', '{"hello": "world"}');
    await page.getByRole('button', { name: 'Import' }).click();
    await expect.poll(() => alert.textContent()).toMatch(/^This file is not a Terraform or OpenTofu state document: .+/);
    expect((await call(server, admin, 'GET', '/api/tf-states/notes')).status).toBe(404);
    await page.getByLabel('State file (or drop it here)').setInputFiles(stateFile('huge.tfstate', LIMIT + 4096));
    await page.getByRole('button', { name: 'Import' }).click();
    await expect
      .poll(() => alert.textContent())
      .toBe("This file is larger than the server's limit of 1.0 MiB (HEGEMONY_TF_STATE_MAX_BYTES).");
    await accessible(page, 'the import page with a refusal');
    await keyboardReachable(page, 'the import page with a refusal');
    expect((await call(server, admin, 'GET', '/api/tf-states/huge')).status).toBe(404);
    await context.close();
  });
});

describe('the admin pages', () => {
  it('shows the audit log newest first, paged, filtered by action, and one state’s log', async () => {
    for (let i = 0; i < 52; i++) {
      const r = await call(server, admin, 'POST', `/api/tf-states/audit-${String(i).padStart(2, '0')}/import`, stateDoc(1, `l${i}`, 'v'));
      expect(r.status).toBe(201);
    }
    await call(server, admin, 'DELETE', '/api/tf-states/audit-00');
    const { context, page, problems } = await open(browser, server);
    await signIn(page, admin);
    await page.getByRole('link', { name: 'Audit log' }).click();
    const rows = page.locator('table.audit tbody tr');
    await expect.poll(() => rows.count()).toBe(50);
    expect(await rows.first().textContent()).toContain('state.deleted');
    expect(await rows.nth(1).textContent()).toContain('audit-51');
    await accessible(page, 'the audit log');
    await keyboardReachable(page, 'the audit log');
    await page.getByRole('link', { name: 'Older entries' }).click();
    await expect.poll(() => rows.first().textContent()).toContain('audit-02');
    await page.getByLabel('Action').selectOption('state.deleted');
    await expect.poll(() => rows.count()).toBe(1);
    expect(await rows.first().textContent()).toContain('audit-00');
    await page.goto('/states/billing');
    await page.getByRole('link', { name: "This state's audit log" }).click();
    await page.getByRole('heading', { name: 'Audit log of billing' }).waitFor();
    await expect.poll(() => rows.count()).toBe(1);
    expect(await rows.first().textContent()).toContain('state.imported');
    expect(problems).toEqual([]);
    await context.close();
  });

  it('changes permissions only after a confirmation that says who gains or loses what', async () => {
    const viewer = server.token('acme', 'vera', 'viewer');
    const { context, page, problems } = await open(browser, server);
    await signIn(page, admin);
    await page.getByRole('link', { name: 'Permissions' }).click();
    await page.getByRole('heading', { name: 'Permissions' }).waitFor();
    await accessible(page, 'the permissions page');
    await keyboardReachable(page, 'the permissions page');
    // By keyboard: the select of tf_state:read, then Save.
    await tabTo(page, 'Role needed for tf_state:read');
    await page.getByLabel('Role needed for tf_state:read').selectOption('viewer');
    await page.getByLabel('Role needed for tf_state:manage').selectOption('');
    await page.getByRole('button', { name: 'Save changes' }).click();
    const dialog = page.getByRole('dialog', { name: 'Change permissions?' });
    await dialog.waitFor();
    expect(await dialog.locator('li').allTextContents()).toEqual([
      'viewers gain tf_state:read: read state content (backend reads, downloads).',
      'admins lose tf_state:manage: force unlock and delete.',
    ]);
    await accessible(page, 'the permissions confirmation');
    await keyboardReachable(page, 'the permissions confirmation');
    await screenshot(page, 'permissions');
    await dialog.getByRole('button', { name: 'Cancel' }).click();
    const allocation = () => call(server, admin, 'GET', '/api/org/permissions').then((r) => r.json());
    expect(await allocation()).toEqual({ 'tf_state:read': 'operator', 'tf_state:write': 'operator', 'tf_state:manage': 'admin', 'tf_state:outputs': 'viewer' });
    await page.getByLabel('Role needed for tf_state:manage').selectOption('admin');
    await page.getByRole('button', { name: 'Save changes' }).click();
    await dialog.getByRole('button', { name: 'Save changes' }).click();
    await page.getByText('Saved.').waitFor();
    expect(await allocation()).toEqual({ 'tf_state:read': 'viewer', 'tf_state:write': 'operator', 'tf_state:manage': 'admin', 'tf_state:outputs': 'viewer' });
    expect((await call(server, viewer, 'GET', '/api/whoami')).json().allowed_actions.download).toBe(true);
    expect(problems).toEqual([]);
    await context.close();
  });

  it('is not offered to an operator, and says why when opened anyway', async () => {
    const operator = server.token('acme', 'otto', 'operator');
    const { context, page } = await open(browser, server);
    await signIn(page, operator);
    expect(await page.getByRole('link', { name: 'Audit log' }).count()).toBe(0);
    expect(await page.getByRole('link', { name: 'Permissions' }).count()).toBe(0);
    await page.goto('/audit');
    await page.getByText('The audit log needs the admin role; yours is operator.').waitFor();
    await page.goto('/permissions');
    await page.getByText('Permissions need the admin role; yours is operator.').waitFor();
    await context.close();
  });
});
