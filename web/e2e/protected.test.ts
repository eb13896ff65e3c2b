// Protected states (admins): a pattern protected by a chosen trust policy from the trust
// policies page, the mark on the list and on the state's page, the server's refusal in its
// words, removal after a confirmation; the section is reached and read with the keyboard and
// passes axe.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser } from 'playwright-core';

import { accessible, call, keyboardReachable, launch, open, screenshot, Server, signIn, startServer, stateDoc } from './harness';

let server: Server;
let browser: Browser;
let admin: string;

const policy = {
  issuer: 'https://gitlab.com',
  audience: 'https://state.example.com/orgs/acme',
  claims: { project_id: '42', ref_protected: 'true' },
  role: 'operator',
  states: ['*'],
  session_seconds: 3600,
};

beforeAll(async () => {
  server = await startServer();
  browser = await launch();
  admin = server.token('acme', 'ada', 'admin');
  for (const name of ['gitlab-protected', 'github-production']) {
    expect((await call(server, admin, 'PUT', `/api/org/trust-policies/${name}`, policy)).status).toBe(201);
  }
  for (const name of ['prod-net', 'dev-net']) {
    expect((await call(server, admin, 'POST', `/api/tf-states/${name}/state`, stateDoc(1, name, 'one'))).status).toBe(200);
  }
});

afterAll(async () => {
  await browser?.close();
  await server?.stop();
});

describe('protected states', () => {
  it('protects a pattern by a chosen policy, marks its states, and removes the protection after a confirmation', async () => {
    const { context, page, problems } = await open(browser, server);
    await signIn(page, admin);
    await page.getByRole('link', { name: 'Trust policies' }).click();
    await page.getByRole('heading', { name: 'Protected states', level: 2 }).waitFor();
    await page.getByText('No protected state: every state is changed as roles allow.').waitFor();
    await page.getByLabel(/^State name or pattern/).fill('prod-*');
    // None chosen: said before anything is sent.
    await page.getByRole('button', { name: 'Protect', exact: true }).click();
    await page.getByText('Choose at least one trust policy.').waitFor();
    await page.getByRole('checkbox', { name: 'gitlab-protected' }).check();
    await accessible(page, 'the protected states section');
    await keyboardReachable(page, 'the protected states section');
    await page.getByRole('button', { name: 'Protect', exact: true }).click();
    await page.getByText('States prod-* are protected.').waitFor();
    const row = page.getByRole('row', { name: /prod-\*/ });
    await row.getByText('gitlab-protected').waitFor();
    expect((await call(server, admin, 'GET', '/api/org/protected-states')).json().protections).toEqual([
      { pattern: 'prod-*', policies: ['gitlab-protected'] },
    ]);
    // The server's refusal, in its words: a pattern no state name can be.
    await page.getByLabel(/^State name or pattern/).fill('.hidden*');
    await page.getByRole('checkbox', { name: 'github-production' }).check();
    await page.getByRole('button', { name: 'Protect', exact: true }).click();
    await page.getByText('state pattern', { exact: false }).waitFor();
    await screenshot(page, 'protected-states');

    // The mark on the list, and on the state's page with the jobs that change it.
    await page.getByRole('navigation', { name: 'Sidebar' }).getByRole('link', { name: 'Terraform States' }).click();
    const listed = page.getByRole('row', { name: /prod-net/ });
    await listed.getByText('Protected: gitlab-protected').waitFor();
    expect(await page.getByRole('row', { name: /dev-net/ }).getByText(/Protected/).count()).toBe(0);
    await accessible(page, 'the list with a protected state');
    await listed.getByRole('link', { name: 'prod-net' }).click();
    await page.getByText('Protected (prod-*): changed only by CI jobs of gitlab-protected').waitFor();
    await accessible(page, 'a protected state page');

    await page.goto('/trust-policies');
    await page.getByRole('button', { name: 'Remove the protection of prod-*' }).click();
    const dialog = page.getByRole('dialog', { name: 'Remove the protection of prod-*?' });
    await dialog.waitFor();
    await accessible(page, 'the removal confirmation');
    await dialog.getByRole('button', { name: 'Cancel' }).click();
    expect(await page.getByRole('row', { name: /prod-\*/ }).count()).toBe(1);
    await page.getByRole('button', { name: 'Remove the protection of prod-*' }).click();
    await dialog.getByRole('button', { name: 'Remove' }).click();
    await page.getByText('States prod-* are no longer protected.').waitFor();
    expect(await page.getByRole('row', { name: /prod-\*/ }).count()).toBe(0);
    expect(problems).toEqual([]);
    await context.close();
  });
});
