// What changed in a version, on the state page: a state written by real Terraform (three
// applies), the view opened from a version's row by keyboard naming exactly what the API
// names and no value, "Compare with" another version, the row's `+a ~c -r` once opened and
// nothing compared on page load, a viewer offered nothing (with the reason), and a
// different lineage and an OpenTofu-encrypted side said in words.

import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser, Page } from 'playwright-core';

import { accessible, call, keyboardReachable, launch, open, screenshotOf, Server, signIn, startServer, stateDoc, tabTo, Tf } from './harness';

let server: Server;
let browser: Browser;
let tokens: { viewer: string; operator: string };
let tf: Tf;
// Values planted in the configuration: none may appear on the page.
const tag = randomBytes(6).toString('hex');
const SECRETS = [`secret-a-${tag}`, `secret-b-${tag}`];
const PLAIN = [`plain-1-${tag}`, `plain-2-${tag}`, `plain-3-${tag}`];

/** Version 1: app and vault. 2: app and vault changed, queue["eu"] and a sensitive output added. 3: app changed, queue removed. */
function config(step: 1 | 2 | 3) {
  const secret = SECRETS[step === 1 ? 0 : 1];
  const parts = [
    'terraform {\n  backend "http" {}\n}',
    `variable "secret" {\n  sensitive = true\n  default   = "${secret}"\n}`,
    `resource "terraform_data" "app" {\n  input = "${PLAIN[step - 1]}"\n}`,
    'resource "terraform_data" "vault" {\n  input = var.secret\n}',
    'output "app" {\n  value = terraform_data.app.output\n}',
  ];
  if (step === 2) parts.push('resource "terraform_data" "queue" {\n  for_each = toset(["eu"])\n  input    = each.key\n}');
  if (step >= 2) parts.push('output "token" {\n  value     = var.secret\n  sensitive = true\n}');
  writeFileSync(join(tf.dir, 'main.tf'), parts.join('\n') + '\n');
}

beforeAll(async () => {
  server = await startServer();
  browser = await launch();
  tokens = { viewer: server.token('acme', 'vera', 'viewer'), operator: server.token('acme', 'otto', 'operator') };
  tf = new Tf(server, 'web-app', tokens.operator);
  config(1);
  tf.init();
  for (const step of [1, 2, 3] as const) {
    config(step);
    tf.run('apply', '-auto-approve', '-no-color');
  }
});

afterAll(async () => {
  await browser?.close();
  await server?.stop();
  tf?.remove();
});

/** The state page, with every call to a changes route it makes recorded. */
async function openState(token: string, path = '/states/web-app') {
  const { context, page, problems } = await open(browser, server);
  const compared: string[] = [];
  page.on('request', (r) => {
    if (r.url().includes('/changes')) compared.push(new URL(r.url()).pathname + new URL(r.url()).search);
  });
  await signIn(page, token);
  await page.goto(path);
  await page.getByRole('heading', { name: 'Versions' }).waitFor();
  const close = async () => {
    expect(problems).toEqual([]);
    await context.close();
  };
  return { page, compared, close };
}

type Answer = {
  counts: { added: number; changed: number; removed: number };
  resources: { added: { address: string }[]; changed: { address: string; attributes: string[]; sensitive: string[]; sensitive_only: boolean }[]; removed: { address: string }[] };
  outputs: { added: { name: string }[]; changed: { name: string }[]; removed: { name: string }[] };
};

async function answer(version: number, since?: number, state = 'web-app'): Promise<Answer> {
  const r = await call(server, tokens.operator, 'GET', `/api/tf-states/${state}/versions/${version}/changes${since ? `?since=${since}` : ''}`);
  expect(r.status).toBe(200);
  for (const value of [...SECRETS, ...PLAIN]) expect(r.text).not.toContain(value);
  return r.json();
}

const listed = (page: Page, name: string, part = ':scope > li > code:first-of-type') =>
  page.getByRole('list', { name, exact: true }).locator(part).allTextContents();

/** The view shows exactly the instances and outputs of the API's answer, in its order. */
async function showsExactly(page: Page, a: Answer) {
  const view = page.locator('section.changes');
  await view.locator('.counts').waitFor();
  const none = async (name: string) => ((await page.getByRole('list', { name, exact: true }).count()) ? listed(page, name) : []);
  expect(await none('Resource instances added')).toEqual(a.resources.added.map((r) => r.address));
  expect(await none('Resource instances changed')).toEqual(a.resources.changed.map((r) => r.address));
  expect(await none('Resource instances removed')).toEqual(a.resources.removed.map((r) => r.address));
  expect(await none('Outputs added')).toEqual(a.outputs.added.map((o) => o.name));
  expect(await none('Outputs changed')).toEqual(a.outputs.changed.map((o) => o.name));
  expect(await none('Outputs removed')).toEqual(a.outputs.removed.map((o) => o.name));
  for (const r of a.resources.changed) {
    const paths = page.getByRole('list', { name: `Attributes of ${r.address} that differ` });
    expect(await paths.locator('code').allTextContents()).toEqual(r.attributes);
    // The sensitive mark is on exactly the paths either version marks sensitive.
    expect(await paths.locator('li').filter({ has: page.locator('.badge.sensitive') }).locator('code').allTextContents()).toEqual(
      r.attributes.filter((p) => r.sensitive.includes(p)),
    );
  }
  const { added, changed, removed } = a.counts;
  expect(await view.locator('.counts strong').textContent()).toBe(`+${added} ~${changed} -${removed}`);
  // No value in the view. The page's Outputs section shows the latest version's plain
  // output by design (tf_state:outputs), and nothing else planted: no secret, no older value.
  const shown = await view.innerHTML();
  for (const value of [...SECRETS, ...PLAIN]) expect(shown).not.toContain(value);
  const html = await page.content();
  for (const value of [...SECRETS, PLAIN[0], PLAIN[1]]) expect(html).not.toContain(value);
}

const row = (page: Page, version: number) => page.locator('table.versions tbody tr').filter({ has: page.locator(`th:text-is("${version}")`) });

describe('the changes view', () => {
  it('names exactly what changed, marks the sensitive change without a value, and counts it in the row', async () => {
    const { page, compared, close } = await openState(tokens.operator);
    // Nothing is compared until someone asks: each comparison opens two versions and is audited.
    expect(compared).toEqual([]);
    const versions = (await call(server, tokens.operator, 'GET', '/api/tf-states/web-app/versions')).json().versions;
    const v2 = versions.find((v: { version: number }) => v.version === 2);
    const cells = await row(page, 2).locator('td').allTextContents();
    expect(cells[1]).toBe(v2.terraform_version);
    expect(cells[2]).toBe('3');
    expect(v2.instances).toBe(3);
    expect(cells[3]).toBe('Changes');

    // By keyboard, from the row; the focus lands on the view.
    await tabTo(page, 'Changes in version 2');
    await page.keyboard.press('Enter');
    await page.getByRole('heading', { name: 'What changed in version 2' }).waitFor();
    // Preact moves the focus in an effect, just after the view is drawn.
    await page.waitForFunction(() => document.activeElement?.id === 'changes-title');
    expect(new URL(page.url()).search).toBe('?changes=2');
    const a = await answer(2);
    expect(a.resources.added.map((r) => r.address)).toEqual(['terraform_data.queue["eu"]']);
    expect(a.resources.changed.map((r) => r.address).sort()).toEqual(['terraform_data.app', 'terraform_data.vault']);
    expect(a.resources.removed).toEqual([]);
    expect(a.outputs.added.map((o) => o.name)).toEqual(['token']);
    expect(a.outputs.changed.map((o) => o.name)).toEqual(['app']);
    await showsExactly(page, a);
    expect(await page.locator('section.changes .counts strong').textContent()).toBe('+1 ~2 -0');
    expect(await page.locator('section.changes').textContent()).toContain('Compared with');

    // The vault's input is sensitive: marked (showsExactly checks which paths), no value.
    const vault = a.resources.changed.find((r) => r.address === 'terraform_data.vault')!;
    expect(vault.sensitive).toContain('input');
    const app = page.getByRole('list', { name: 'Resource instances changed' }).locator('li').filter({ hasText: 'terraform_data.app' });
    expect(await app.locator('.paths code').allTextContents()).toContain('input.value');
    expect(await app.locator('.badge.sensitive').count()).toBe(0);
    const token = page.getByRole('list', { name: 'Outputs added' }).locator('li');
    expect(await token.textContent()).toContain('sensitive');
    expect(await page.getByRole('list', { name: 'Outputs changed' }).locator('li').textContent()).toContain('value changed');

    // The row now carries the counts; the others still have none, and one call was made.
    expect(await row(page, 2).locator('.counts [aria-hidden="true"]').textContent()).toBe('+1 ~2 -0');
    expect(await row(page, 2).locator('.counts .visually-hidden').textContent()).toBe('1 added, 2 changed, 0 removed');
    expect(await row(page, 3).locator('.counts').count()).toBe(0);
    expect(compared).toEqual(['/api/tf-states/web-app/versions/2/changes']);

    await accessible(page, 'the changes view');
    await keyboardReachable(page, 'the changes view');
    await screenshotOf(page.locator('section.changes'), 'changes');
    await page.getByRole('button', { name: 'Close changes' }).click();
    await page.getByRole('heading', { name: 'What changed in version 2' }).waitFor({ state: 'detached' });
    expect(new URL(page.url()).search).toBe('');
    await close();
  });

  it('compares with any other version, older or newer, chosen in "Compare with"', async () => {
    const { page, compared, close } = await openState(tokens.operator, '/states/web-app?changes=3');
    await page.getByRole('heading', { name: 'What changed in version 3' }).waitFor();
    const since2 = await answer(3);
    expect(since2.resources.removed.map((r) => r.address)).toEqual(['terraform_data.queue["eu"]']);
    await showsExactly(page, since2);
    expect(await page.getByLabel('Compare with').inputValue()).toBe('');

    await page.getByLabel('Compare with').focus();
    await page.getByLabel('Compare with').selectOption('1');
    await page.waitForURL(/\?changes=3&since=1$/);
    await page.getByText('version 1: serial').waitFor();
    // The focus stays on the choice, to try another.
    expect(await page.evaluate(() => document.activeElement?.id)).toBe('compare-with');
    const since1 = await answer(3, 1);
    // queue["eu"] came and went between 1 and 3: it is in neither.
    expect(since1.resources.added).toEqual([]);
    expect(since1.resources.removed).toEqual([]);
    expect(since1.resources.changed.map((r) => r.address).sort()).toEqual(['terraform_data.app', 'terraform_data.vault']);
    await showsExactly(page, since1);
    // The row keeps the counts of the default comparison, not of the one chosen.
    const { added, changed, removed } = since2.counts;
    expect(await row(page, 3).locator('.counts [aria-hidden="true"]').textContent()).toBe(`+${added} ~${changed} -${removed}`);

    // A newer version: version 1 compared with version 3 is the reverse (the choice is
    // reached by Tab; Chromium's keys on a closed select differ by platform, so it is picked).
    await page.goto('/states/web-app?changes=1');
    await page.getByText('nothing: version 1 is the first, so everything it holds is added').waitFor();
    expect(await page.locator('section.changes .counts strong').textContent()).toBe('+2 ~0 -0');
    await tabTo(page, /^nothing \(version 1 is the first\)/);
    await page.getByLabel('Compare with').selectOption('3');
    await page.waitForURL(/\?changes=1&since=3$/);
    const reverse = await answer(1, 3);
    expect(reverse.resources.changed.map((r) => r.address).sort()).toEqual(['terraform_data.app', 'terraform_data.vault']);
    expect(reverse.outputs.removed.map((o) => o.name)).toEqual(['token']);
    await showsExactly(page, reverse);
    // Back goes to the comparison before.
    await page.goBack();
    await page.waitForURL(/\?changes=1$/);
    await page.getByText('nothing: version 1 is the first, so everything it holds is added').waitFor();
    expect(compared.filter((c) => c.includes('since=3'))).toEqual(['/api/tf-states/web-app/versions/1/changes?since=3']);
    await close();
  });

  it('is not offered to a viewer, who is told why, not even by its address', async () => {
    const { page, compared, close } = await openState(tokens.viewer, '/states/web-app?changes=2');
    expect(await page.getByRole('button', { name: /^Changes in version/ }).count()).toBe(0);
    expect(await page.locator('.reason').textContent()).toBe(
      'What changed between versions is not offered: it is read from the versions\' content, which needs tf_state:read (as a download does), and your role (viewer) does not have it.',
    );
    expect(await page.getByRole('heading', { name: 'What changed in version 2' }).count()).toBe(0);
    expect(compared).toEqual([]);
    expect((await call(server, tokens.viewer, 'GET', '/api/tf-states/web-app/versions/2/changes')).status).toBe(403);
    await close();
  });

  it('says when only sensitive attributes changed, and why an OpenTofu-encrypted version cannot be compared', async () => {
    // Versions 3 and 4 differ only in a sensitive attribute; version 2 is OpenTofu-encrypted
    // and carries no serial or lineage, so the writes after it are checked against version 1's.
    const role = (serial: number, password: string, lineage = 'lin-one') =>
      `{"version":4,"terraform_version":"1.11.4","serial":${serial},"lineage":"${lineage}","outputs":{},"resources":[{"mode":"managed","type":"aws_iam_role","name":"app","provider":"provider[\\"registry.terraform.io/hashicorp/aws\\"]","instances":[{"schema_version":0,"attributes":{"name":"app","password":"${password}"},"sensitive_attributes":[[{"type":"get_attr","value":"password"}]]}]}],"check_results":null}`;
    for (const body of [stateDoc(1, 'lin-one', 'a'), '{"encrypted_data":"AA","encryption_version":"v0"}']) {
      const r = await call(server, tokens.operator, 'POST', '/api/tf-states/mixed/state', body);
      expect(r.status, r.text).toBe(200);
    }
    const other = await call(server, tokens.operator, 'POST', '/api/tf-states/mixed/state', role(2, SECRETS[0], 'lin-two'));
    expect(other.status, other.text).toBe(409);
    expect(other.json().error.code).toBe('lineage_mismatch');
    for (const body of [role(2, SECRETS[0]), role(3, SECRETS[1])]) {
      const r = await call(server, tokens.operator, 'POST', '/api/tf-states/mixed/state', body);
      expect(r.status, r.text).toBe(200);
    }
    const { page, close } = await openState(tokens.operator, '/states/mixed?changes=3&since=1');
    await page.locator('section.changes .counts').waitFor();
    expect(await page.locator('.lineage').count()).toBe(0);
    await showsExactly(page, await answer(3, 1, 'mixed'));
    await accessible(page, 'a comparison past an encrypted version');
    expect(await row(page, 2).locator('td').nth(1).textContent()).toBe('unknown');
    expect(await row(page, 2).locator('td').nth(2).textContent()).toBe('unknown');

    await page.getByLabel('Compare with').selectOption('2');
    const alert = page.getByRole('alert');
    await alert.waitFor();
    const refusal = await call(server, tokens.operator, 'GET', '/api/tf-states/mixed/versions/3/changes?since=2');
    expect(refusal.status).toBe(409);
    expect(await alert.textContent()).toBe(`These versions cannot be compared here: ${refusal.json().error.message}`);
    expect(await alert.textContent()).toContain('OpenTofu');
    expect(await page.locator('section.changes .counts').count()).toBe(0);
    await accessible(page, 'a refused comparison');

    await page.goto('/states/mixed?changes=4');
    await page.locator('section.changes .counts').waitFor();
    const sensitive = await answer(4, undefined, 'mixed');
    expect(sensitive.resources.changed).toMatchObject([{ address: 'aws_iam_role.app', attributes: ['password'], sensitive: ['password'], sensitive_only: true }]);
    await showsExactly(page, sensitive);
    expect(await page.getByRole('list', { name: 'Resource instances changed' }).textContent()).toContain(
      'only sensitive attributes changed (no value is shown)',
    );
    expect(await page.locator('.lineage').count()).toBe(0);
    await close();
  });
});
