// What the list and a state's page show of runs' steps: a run's hold on a state with no
// version yet (listed, with its run's link, and forced by an admin), a step's lock once its
// token no longer works (shown unlocked), and an imported OpenTofu-encrypted file (marked on
// the list and on its page).

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser } from 'playwright-core';

import { accessible, call, launch, open, Server, signIn, startServer, until } from './harness';

let server: Server;
let browser: Browser;
let admin: string;
let operator: string;
let platform: string;

beforeAll(async () => {
  // A grace of one second (accepted with a warning), so a run's end is seen to run out.
  server = await startServer({
    HEGEMONY_RUN_URL_TEMPLATE: 'https://ci.example.com/runs/{run}',
    HEGEMONY_TF_STATE_RUN_END_GRACE_SECONDS: '1',
  });
  browser = await launch();
  admin = server.token('acme', 'ada', 'admin');
  operator = server.token('acme', 'otto', 'operator');
  platform = server.platformToken();
});

afterAll(async () => {
  await browser?.close();
  await server?.stop();
});

/** Mints a step token of `run` for `state`; returns the token. */
async function mint(run: string, state: string, kind: 'plan' | 'apply', hold: boolean): Promise<string> {
  const minted = await call(server, platform, 'POST', `/api/runs/${run}/tf-state-tokens`, {
    org: 'acme',
    state,
    step: kind,
    attempt: 1,
    kind,
    timeout_seconds: 3600,
    hold,
  });
  expect(minted.status).toBe(201);
  return minted.json().token as string;
}

/** A backend LOCK or UNLOCK with a step token, as Terraform sends it (Basic auth). */
async function backend(token: string, method: 'POST' | 'DELETE', state: string, id: string): Promise<number> {
  const response = await fetch(`${server.base}/api/tf-states/${state}/lock`, {
    method,
    headers: { Authorization: `Basic ${Buffer.from(`tester:${token}`).toString('base64')}` },
    body: JSON.stringify({ ID: id, Operation: 'OperationTypePlan', Who: 'step@runner' }),
  });
  await response.text();
  return response.status;
}

const lockOf = async (state: string) => (await call(server, admin, 'GET', `/api/tf-states/${state}`)).json().lock;

describe('a hold on a state with no version yet', () => {
  it('is listed with its run, shown on its page, and forced by an admin', async () => {
    // The first run of `fresh` plans with a hold: its plan writes nothing and its release
    // leaves only the hold, which answers everyone else 423.
    const plan = await mint('run-7', 'fresh', 'plan', true);
    expect(await backend(plan, 'POST', 'fresh', 'P')).toBe(200);
    expect(await backend(plan, 'DELETE', 'fresh', 'P')).toBe(200);
    expect((await call(server, operator, 'POST', '/api/tf-states/fresh/lock', { ID: 'O' })).status).toBe(423);

    const { context, page, problems } = await open(browser, server);
    await signIn(page, operator);
    const row = page.getByRole('row', { name: /fresh/ });
    await expect.poll(() => row.textContent()).toMatch(/Held by run run-7 until its apply/);
    expect(await row.textContent()).toContain('none yet');
    expect(await row.getByRole('link', { name: 'run run-7' }).getAttribute('href')).toBe('https://ci.example.com/runs/run-7');
    await row.getByRole('link', { name: 'fresh' }).click();
    await page.getByRole('heading', { name: 'fresh', level: 1 }).waitFor();
    const lock = page.getByRole('region', { name: 'Lock' });
    await expect.poll(() => lock.textContent()).toMatch(/Held by run run-7 until its apply/);
    expect(await page.getByText('No versions yet: the holding run writes the first when it applies.').count()).toBe(1);
    expect(await page.getByRole('button', { name: 'Force unlock' }).count()).toBe(0);
    await accessible(page, 'a held state with no version, as an operator');
    await context.close();

    const asAdmin = await open(browser, server);
    await signIn(asAdmin.page, admin);
    await asAdmin.page.goto('/states/fresh');
    await asAdmin.page.getByRole('heading', { name: 'fresh', level: 1 }).waitFor();
    await asAdmin.page.getByRole('button', { name: 'Force unlock' }).click();
    const dialog = asAdmin.page.getByRole('dialog');
    expect(await dialog.textContent()).toMatch(/held by run run-7 until its apply/);
    await dialog.getByRole('button', { name: 'Force unlock' }).click();
    // Nothing is left of a state with no version once its hold ends: back to the list.
    await asAdmin.page.getByRole('heading', { name: 'Terraform States' }).waitFor();
    expect((await call(server, admin, 'GET', '/api/tf-states/fresh')).status).toBe(404);
    expect((await call(server, operator, 'POST', '/api/tf-states/fresh/lock', { ID: 'O' })).status).toBe(200);
    expect(problems.concat(asAdmin.problems)).toEqual([]);
    await asAdmin.context.close();
  });
});

describe('a step lock whose token no longer works', () => {
  it('is shown unlocked on the list and the page once its run ended and the grace passed, or its attempt is gone', async () => {
    for (const name of ['ended', 'gone']) {
      const imported = await call(server, operator, 'POST', `/api/tf-states/${name}/import`, `{"version":4,"serial":1,"lineage":"lin-${name}","outputs":{},"resources":[]}`);
      expect(imported.status).toBe(201);
    }
    const ended = await mint('run-8', 'ended', 'apply', false);
    expect(await backend(ended, 'POST', 'ended', 'E')).toBe(200);
    const gone = await mint('run-9', 'gone', 'apply', false);
    expect(await backend(gone, 'POST', 'gone', 'G')).toBe(200);
    expect((await lockOf('ended')).id).toBe('E');
    expect((await call(server, platform, 'POST', '/api/runs/run-8/end', {})).status).toBe(200);
    expect((await call(server, platform, 'POST', '/api/runs/run-9/steps/apply/gone', { attempt: 1 })).status).toBe(200);
    // The grace is a second: wait for the step's token to stop working.
    await until(async () => (await backend(ended, 'POST', 'ended', 'E2')) === 401);

    const { context, page, problems } = await open(browser, server);
    await signIn(page, admin);
    for (const name of ['ended', 'gone']) {
      const row = page.getByRole('row', { name: new RegExp(`^${name}`) });
      await expect.poll(() => row.textContent()).toMatch(/unlocked/);
      await page.goto(`/states/${name}`);
      await page.getByRole('heading', { name, level: 1 }).waitFor();
      const lock = page.getByRole('region', { name: 'Lock' });
      await expect.poll(() => lock.textContent()).toContain('Unlocked.');
      expect(await page.getByRole('button', { name: 'Force unlock' }).count()).toBe(0);
      expect(await page.getByRole('button', { name: 'Delete state' }).count()).toBe(1);
      await page.goto('/states');
    }
    expect(problems).toEqual([]);
    await context.close();
  });
});

describe('an imported OpenTofu-encrypted file', () => {
  it('is marked on the list and on its page', async () => {
    const encrypted = '{"serial":3,"lineage":"4e2f-uuid","meta":{"key_provider.pbkdf2.main":"eyJzYWx0IjoiYSJ9"},"encrypted_data":"q83vEjRWeJA=","encryption_version":"v0"}\n';
    expect((await call(server, operator, 'POST', '/api/tf-states/vault/import', encrypted)).status).toBe(201);
    const { context, page, problems } = await open(browser, server);
    await signIn(page, operator);
    const row = page.getByRole('row', { name: /vault/ });
    await expect.poll(() => row.textContent()).toContain('OpenTofu-encrypted');
    await row.getByRole('link', { name: 'vault' }).click();
    await page.getByRole('heading', { name: 'vault', level: 1 }).waitFor();
    expect(await page.locator('.title-row .badge.encrypted').textContent()).toBe('OpenTofu-encrypted');
    expect(await page.getByRole('button', { name: 'Download version 1' }).count()).toBe(1);
    await accessible(page, 'an OpenTofu-encrypted state');
    expect(problems).toEqual([]);
    await context.close();
  });
});
