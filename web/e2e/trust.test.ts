// Trust policies (admins): added from the presets, an audience not ending with the org's name
// hinted at as it is typed, a names-only policy on the org's own issuer warned about as it is
// typed and in the list (the server's words), the server's refusals in its words (a name in
// use, a shared issuer without an owner id), removal after a confirmation; not offered to an
// operator.

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
  it('adds policies from the presets, warns on names only, and removes one after a confirmation', async () => {
    const { context, page, problems } = await open(browser, server);
    await signIn(page, admin);
    await page.getByRole('link', { name: 'Trust policies' }).click();
    await page.getByRole('heading', { name: 'Trust policies', level: 1 }).waitFor();
    await page.getByText('No trust policy yet: no CI job can open a session.').waitFor();
    expect(await page.getByLabel('Issuer', { exact: true }).inputValue()).toBe('https://token.actions.githubusercontent.com');
    const audience = page.getByLabel('Audience', { exact: true });
    expect(await audience.inputValue()).toBe(`${server.base}/orgs/acme`);
    const claims = page.getByLabel(/^Claim conditions/);
    expect(await claims.inputValue()).toContain('repository_id=');
    // The form's hints and warnings as it is filled in, apart from the server's refusals.
    const form = page.getByRole('form', { name: 'Add a trust policy' });
    const notes = form.getByRole('note');
    const refusal = form.getByRole('alert');
    // A names-only policy on the org's own issuer is warned about as it is typed.
    await page.getByLabel(/^Start from/).selectOption('other');
    await page.getByLabel('Issuer', { exact: true }).fill('https://gitlab.acme.example');
    await claims.fill('project_path=acme/net\nref=refs/heads/main');
    await notes.filter({ hasText: 'Matches on project_path by name only' }).waitFor();
    // An audience that does not end with the org's name is hinted at as it is typed.
    await audience.fill('https://state.example.com');
    await notes.filter({ hasText: 'The audience must end with /acme' }).waitFor();
    await audience.fill('https://state.example.com/orgs/acme');
    expect(await notes.filter({ hasText: 'The audience must end with' }).count()).toBe(0);
    await page.getByLabel('Name', { exact: true }).fill('by-name');
    await page.getByLabel(/^States/).fill('net-*, dns');
    await accessible(page, 'the trust policies page');
    await keyboardReachable(page, 'the trust policies page');
    await page.getByRole('button', { name: 'Add policy' }).click();
    await page.getByText('Trust policy by-name added.').waitFor();
    // The list says the server's warnings, in its words.
    const warned = page.getByRole('region', { name: 'What to know about these policies' });
    await warned.getByText('policy by-name matches on project_path by name only', { exact: false }).waitFor();
    await accessible(page, 'the trust policies page with a warning');
    // The server's refusal, in its words: the same name again.
    await page.getByLabel('Name', { exact: true }).fill('by-name');
    await page.getByRole('button', { name: 'Add policy' }).click();
    await refusal.filter({ hasText: 'trust policy by-name exists already' }).waitFor();
    // On a shared issuer a name is refused without an owner id: hinted at, then the server's words.
    await page.getByLabel(/^Start from/).selectOption('github');
    await claims.fill('repository=acme/net');
    await notes.filter({ hasText: 'must hold an exact condition on repository_owner_id or repository_id' }).waitFor();
    await page.getByLabel('Name', { exact: true }).fill('github-by-name');
    await page.getByRole('button', { name: 'Add policy' }).click();
    await refusal
      .filter({
        hasText:
          'a policy on the shared issuer https://token.actions.githubusercontent.com must hold an exact condition on repository_owner_id or repository_id',
      })
      .waitFor();
    // With immutable ids: no warning.
    await page.getByLabel(/^Start from/).selectOption('gitlab');
    expect(await page.getByLabel('Issuer', { exact: true }).inputValue()).toBe('https://gitlab.com');
    await claims.fill('project_id=42\nnamespace_id=7\nref_protected=true');
    expect(await page.getByText(/by name only/).count()).toBe(1);
    expect(await notes.count()).toBe(0);
    await page.getByLabel('Name', { exact: true }).fill('gitlab-deploy');
    await page.getByLabel(/^Role/).selectOption('viewer');
    await page.getByRole('button', { name: 'Add policy' }).click();
    await page.getByText('Trust policy gitlab-deploy added.').waitFor();
    const listed = (await call(server, admin, 'GET', '/api/org/trust-policies')).json();
    expect(listed.policies).toEqual([
      {
        name: 'by-name',
        issuer: 'https://gitlab.acme.example',
        audience: 'https://state.example.com/orgs/acme',
        claims: { project_path: 'acme/net', ref: 'refs/heads/main' },
        role: 'operator',
        states: ['net-*', 'dns'],
        session_seconds: 3600,
      },
      {
        name: 'gitlab-deploy',
        issuer: 'https://gitlab.com',
        audience: 'https://state.example.com/orgs/acme',
        claims: { project_id: '42', namespace_id: '7', ref_protected: 'true' },
        role: 'viewer',
        states: ['net-*', 'dns'],
        session_seconds: 3600,
      },
    ]);
    expect(listed.warnings).toEqual([
      'policy by-name matches on project_path by name only: a name can be taken again by someone else after a rename or a delete; add an immutable id condition (repository_id, repository_owner_id, project_id, namespace_id)',
    ]);
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
    expect(await page.getByRole('region', { name: 'What to know about these policies' }).count()).toBe(0);
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
