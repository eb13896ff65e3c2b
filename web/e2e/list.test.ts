// Signing in and out, a refused token, and the list of states: a lock Terraform holds, a
// run step's lock and its run's hold with their links, paging past one page, the name filter, and the empty list.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser } from 'playwright-core';

import { accessible, call, keyboardReachable, launch, open, screenshot, Server, signIn, startServer, stateDoc, tabTo, Tf, until } from './harness';

let server: Server;
let browser: Browser;

beforeAll(async () => {
  server = await startServer({ HEGEMONY_RUN_URL_TEMPLATE: 'https://ci.example.com/runs/{run}' });
  browser = await launch();
});

afterAll(async () => {
  await browser?.close();
  await server?.stop();
});

describe('signing in', () => {
  it('takes the token the first start printed, shows who it is, and signs out', async () => {
    const { context, page, problems } = await open(browser, server);
    await page.goto('/');
    await page.getByRole('heading', { name: 'Sign in to Hegemony State' }).waitFor();
    expect(await page.getByText('hegemony-state token create').count()).toBe(1);
    await accessible(page, 'the sign-in page');
    await keyboardReachable(page, 'the sign-in page');
    expect(server.firstToken).toMatch(/\S{20,}/);
    expect(server.welcome).toContain(`Open ${server.base}/ in a browser and sign in with it.`);
    await signIn(page, server.firstToken);
    const who = page.getByLabel('Signed in as');
    await expect.poll(() => who.textContent()).toBe('org defaultuser adminrole admin');
    // The token is in this tab's sessionStorage only: never localStorage, never a cookie.
    const storage = await page.evaluate(() => ({
      session: Object.values(sessionStorage),
      local: localStorage.length,
      cookie: document.cookie,
    }));
    expect(storage.session).toContain(server.firstToken);
    expect(storage.local).toBe(0);
    expect(storage.cookie).toBe('');
    expect((await context.cookies()).length).toBe(0);
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByRole('heading', { name: 'Sign in to Hegemony State' }).waitFor();
    expect(await page.evaluate(() => sessionStorage.length)).toBe(0);
    await page.goto('/');
    await page.getByRole('heading', { name: 'Sign in to Hegemony State' }).waitFor();
    expect(problems).toEqual([]);
    await context.close();
  });

  it('refuses a bad token in words and keeps nothing', async () => {
    const { context, page } = await open(browser, server);
    await page.goto('/sign-in');
    await page.getByLabel('Personal access token').fill('hgs_not-a-token');
    await page.getByRole('button', { name: 'Sign in' }).click();
    const alert = page.getByRole('alert');
    await expect.poll(() => alert.textContent()).toMatch(/^This token was refused: .+/);
    expect(await page.evaluate(() => sessionStorage.length)).toBe(0);
    await context.close();
  });

  it('returns to the sign-in page with the reason when a token stops working', async () => {
    const token = server.token('acme', 'rita', 'viewer');
    const { context, page } = await open(browser, server);
    await signIn(page, token);
    // The list's read answered before the token goes: one still on its way would meet the
    // revoked token first, sign out before the reload, and leave the reloaded page no reason.
    await page.getByRole('heading', { name: 'No states yet' }).waitFor();
    server.revoke('rita');
    await page.reload();
    await page.getByRole('heading', { name: 'Sign in to Hegemony State' }).waitFor();
    await expect.poll(() => page.getByRole('alert').textContent()).toMatch(/^You were signed out: .+/);
    await context.close();
  });
});

describe('the list of states', () => {
  it('shows a lock Terraform holds and a run that holds a state until its apply, with its link', async () => {
    const admin = server.token('acme', 'ada', 'admin');
    const operator = server.token('acme', 'otto', 'operator');
    // A state written by Terraform, whose lock `terraform console` then holds.
    const tf = new Tf(server, 'network', operator);
    tf.init();
    tf.run('apply', '-auto-approve', '-no-color');
    const console = tf.holdLock();
    await until(async () => (await call(server, admin, 'GET', '/api/tf-states/network')).json().lock !== null);
    // A run's plan step, minted with a hold, plans `dns`: the hold stays after the plan.
    const platform = server.platformToken();
    await call(server, operator, 'POST', '/api/tf-states/dns/import', stateDoc(1, 'lin-dns', 'a'));
    const minted = await call(server, platform, 'POST', '/api/runs/run-42/tf-state-tokens', {
      org: 'acme',
      state: 'dns',
      step: 'plan',
      attempt: 1,
      kind: 'plan',
      timeout_seconds: 600,
      hold: true,
    });
    expect(minted.status).toBe(201);
    const step = new Tf(server, 'dns', minted.json().token, minted.json().backend);
    step.init();
    // The step's `terraform console` takes the lock, and with it the hold.
    const stepConsole = step.holdLock();
    await until(async () => (await call(server, admin, 'GET', '/api/tf-states/dns')).json().lock !== null);

    const { context, page, problems } = await open(browser, server);
    await signIn(page, admin);
    const network = page.getByRole('row', { name: /network/ });
    await expect.poll(() => network.textContent()).toMatch(/Locked by otto/);
    const lockId = (await call(server, admin, 'GET', '/api/tf-states/network')).json().lock.id as string;
    expect(await network.textContent()).toContain(lockId);
    const dns = page.getByRole('row', { name: /dns/ });
    expect(await dns.textContent()).toMatch(/Held by run run-42 until its apply/);
    expect(await dns.textContent()).toMatch(/Locked by run run-42 · step plan · attempt 1/);
    const links = dns.getByRole('link', { name: 'run run-42' });
    expect(await links.count()).toBe(2);
    for (const link of await links.all()) {
      expect(await link.getAttribute('href')).toBe('https://ci.example.com/runs/run-42');
    }
    // Size in human units, the last change relative with the exact time on hover, by whom.
    expect(await network.textContent()).toMatch(/\d+(\.\d)? (B|KiB)/);
    const time = network.locator('time').first();
    expect(await time.textContent()).toMatch(/just now|minute/);
    expect(await time.getAttribute('title')).toMatch(/^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(\.\d+)? UTC$/);
    expect(await network.textContent()).toContain('by otto');
    await accessible(page, 'the list with a lock and a hold');
    await keyboardReachable(page, 'the list with a lock and a hold');
    await screenshot(page, 'states');
    // Every row's link is reachable with the keyboard, and opens the state.
    await tabTo(page, 'network');
    await page.keyboard.press('Enter');
    await page.getByRole('heading', { name: 'network', level: 1 }).waitFor();
    expect(problems).toEqual([]);
    await context.close();
    for (const held of [console, stepConsole]) {
      held.stdin!.end();
      await new Promise((ok) => held.once('exit', ok));
    }
    tf.remove();
    step.remove();
  });

  it('pages through more states than one page, and filters by the start of the name', async () => {
    const token = server.token('many', 'mia', 'operator');
    const names = Array.from({ length: 57 }, (_, i) => `app-${String(i).padStart(3, '0')}`);
    for (const name of [...names, 'zeta']) {
      const r = await call(server, token, 'POST', `/api/tf-states/${name}/import`, stateDoc(1, `lin-${name}`, name));
      expect(r.status).toBe(201);
    }
    const { context, page } = await open(browser, server);
    await signIn(page, token);
    const rows = page.locator('table.states tbody tr');
    await expect.poll(() => rows.count()).toBe(50);
    expect(await rows.first().textContent()).toContain('app-000');
    await page.getByRole('link', { name: 'Next page' }).click();
    await expect.poll(() => rows.first().textContent()).toContain('app-050');
    expect(await rows.count()).toBe(8);
    expect(await rows.last().textContent()).toContain('zeta');
    expect(await page.getByRole('link', { name: 'Next page' }).count()).toBe(0);
    await page.getByRole('button', { name: 'Previous page' }).click();
    await expect.poll(() => rows.first().textContent()).toContain('app-000');
    await page.getByLabel('Filter by name (starts with)').fill('app-05');
    await expect.poll(() => rows.count()).toBe(7);
    expect(await rows.first().textContent()).toContain('app-050');
    await page.getByLabel('Filter by name (starts with)').fill('ze');
    await expect.poll(() => rows.count()).toBe(1);
    await page.getByLabel('Filter by name (starts with)').fill('nothing');
    await page.getByText("No state's name starts with that.").waitFor();
    await context.close();
  });

  it('shows the backend.hcl to paste when the org has no state yet', async () => {
    const token = server.token('empty', 'eve', 'operator');
    const { context, page } = await open(browser, server);
    await signIn(page, token);
    await page.getByRole('heading', { name: 'No states yet' }).waitFor();
    const hcl = await page.getByLabel('backend.hcl', { exact: true }).textContent();
    expect(hcl).toContain(`address        = "${server.base}/api/tf-states/example/state"`);
    expect(hcl).toContain('username       = "eve"');
    await accessible(page, 'the empty list');
    await keyboardReachable(page, 'the empty list');
    await context.close();
  });
});
