// Trust policies (admins): added from the GitHub Actions preset, a names-only policy warned
// about as it is typed and in the list, a refusal in the server's words, removal after a
// confirmation; not offered to an operator.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser } from 'playwright-core';

import { accessible, call, keyboardReachable, launch, open, screenshot, Server, signIn, startServer } from './harness';

let server: Server;
let browser: Browser;
let admin: string;

beforeAll(async () => {
  server = await startServer();
  browser = await launch();
  admin = server.token('acme', 'ada', 'admin');
});

afterAll(async () => {
  await browser?.close();
  await server?.stop();
});

describe('trust policies', () => {
  it('adds a policy from the GitHub preset, warns on names only, and removes one after a confirmation', async () => {
    const { context, page, problems } = await open(browser, server);
    await signIn(page, admin);
    await page.getByRole('link', { name: 'Trust policies' }).click();
    await page.getByRole('heading', { name: 'Trust policies', level: 1 }).waitFor();
    await page.getByText('No trust policy yet: no CI job can open a session.').waitFor();
    expect(await page.getByLabel('Issuer', { exact: true }).inputValue()).toBe('https://token.actions.githubusercontent.com');
    const claims = page.getByLabel(/^Claim conditions/);
    expect(await claims.inputValue()).toContain('repository_id=');
    // A names-only policy is warned about as it is typed.
    await claims.fill('repository=acme/net\nref=refs/heads/main');
    await page.getByText(/Matches on repository by name only/).waitFor();
    await page.getByLabel('Name', { exact: true }).fill('by-name');
    await page.getByLabel('Audience', { exact: true }).fill('https://state.example.com');
    await page.getByLabel(/^States/).fill('net-*, dns');
    await accessible(page, 'the trust policies page');
    await keyboardReachable(page, 'the trust policies page');
    await page.getByRole('button', { name: 'Add policy' }).click();
    await page.getByText('Trust policy by-name added.').waitFor();
    const row = page.getByRole('row', { name: /by-name/ });
    await row.getByText(/by name only/).waitFor();
    // The server's refusal, in its words: the same name again.
    await page.getByLabel('Name', { exact: true }).fill('by-name');
    await page.getByRole('button', { name: 'Add policy' }).click();
    await page.getByText('trust policy by-name exists already', { exact: false }).waitFor();
    // With immutable ids: no warning.
    await page.getByLabel(/^Start from/).selectOption('gitlab');
    expect(await page.getByLabel('Issuer', { exact: true }).inputValue()).toBe('https://gitlab.com');
    await claims.fill('project_id=42\nnamespace_id=7\nref_protected=true');
    expect(await page.getByText(/by name only/).count()).toBe(1);
    await page.getByLabel('Name', { exact: true }).fill('gitlab-deploy');
    await page.getByLabel(/^Role/).selectOption('viewer');
    await page.getByRole('button', { name: 'Add policy' }).click();
    await page.getByText('Trust policy gitlab-deploy added.').waitFor();
    const listed = await call(server, admin, 'GET', '/api/org/trust-policies');
    const policies = listed.json().policies;
    expect(policies.map((p: { name: string }) => p.name)).toEqual(['by-name', 'gitlab-deploy']);
    expect(policies[1]).toEqual({
      name: 'gitlab-deploy',
      issuer: 'https://gitlab.com',
      audience: 'https://state.example.com',
      claims: { project_id: '42', namespace_id: '7', ref_protected: 'true' },
      role: 'viewer',
      states: ['net-*', 'dns'],
      session_seconds: 3600,
    });
    await screenshot(page, 'trust-policies');
    await page.getByRole('button', { name: 'Remove by-name' }).click();
    const dialog = page.getByRole('dialog', { name: 'Remove trust policy by-name?' });
    await dialog.waitFor();
    await accessible(page, 'the removal confirmation');
    await dialog.getByRole('button', { name: 'Cancel' }).click();
    expect(await page.getByRole('row', { name: /by-name/ }).count()).toBe(1);
    await page.getByRole('button', { name: 'Remove by-name' }).click();
    await dialog.getByRole('button', { name: 'Remove' }).click();
    await page.getByText('Trust policy by-name removed.').waitFor();
    expect(await page.getByRole('row', { name: /by-name/ }).count()).toBe(0);
    expect(problems).toEqual([]);
    await context.close();
  });

  it('is not offered to an operator, and says why when opened anyway', async () => {
    const operator = server.token('acme', 'otto', 'operator');
    const { context, page } = await open(browser, server);
    await signIn(page, operator);
    expect(await page.getByRole('link', { name: 'Trust policies' }).count()).toBe(0);
    await page.goto('/trust-policies');
    await page.getByText('Trust policies need the admin role; yours is operator.').waitFor();
    await context.close();
  });
});
