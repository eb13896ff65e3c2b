// A state's outputs on its page: a producer written by Terraform with a plain output and a
// sensitive one (a secret planted in it and in a resource), shown to a viewer by name, type
// and value, the sensitive one marked and its value nowhere on the page or in the server's
// log; the terraform_remote_state block the page offers, pasted into a consumer
// configuration, reads the plain output with a viewer's token; and the section goes when
// the allocation takes tf_state:outputs from viewers. Axe-clean and keyboard-usable.

import { writeFileSync } from 'node:fs';
import { join } from 'node:path';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser, Page } from 'playwright-core';

import { accessible, call, keyboardReachable, launch, open, screenshotOf, Server, signIn, startServer, tabTo, Tf } from './harness';

const SECRET = 'hunter2-5f1c0a-planted';

let server: Server;
let browser: Browser;
let tokens: { viewer: string; operator: string; admin: string };
const folders: Tf[] = [];

beforeAll(async () => {
  server = await startServer();
  browser = await launch();
  tokens = {
    viewer: server.token('acme', 'vera', 'viewer'),
    operator: server.token('acme', 'otto', 'operator'),
    admin: server.token('acme', 'ada', 'admin'),
  };
  const producer = new Tf(server, 'db', tokens.operator);
  folders.push(producer);
  writeFileSync(
    join(producer.dir, 'main.tf'),
    `terraform {\n  backend "http" {}\n}\nvariable "secret" {\n  type      = string\n  sensitive = true\n}\nresource "terraform_data" "plain" {\n  input = "${SECRET}-in-a-plain-attribute"\n}\noutput "endpoint" {\n  value = "db.example.com"\n}\noutput "ports" {\n  value = [5432, 5433]\n}\noutput "password" {\n  value     = var.secret\n  sensitive = true\n}\n`,
  );
  producer.init();
  producer.run('apply', '-auto-approve', '-no-color', '-var', `secret=${SECRET}`);
});

afterAll(async () => {
  await browser?.close();
  await server?.stop();
  for (const tf of folders) tf.remove();
});

async function openState(token: string): Promise<{ page: Page; close: () => Promise<void> }> {
  const { context, page, problems } = await open(browser, server);
  await signIn(page, token);
  await page.goto('/states/db');
  await page.getByRole('heading', { name: 'Versions' }).waitFor();
  const close = async () => {
    expect(problems).toEqual([]);
    await context.close();
  };
  return { page, close };
}

describe("a state's outputs", () => {
  it('shows a viewer each output, the sensitive one by its mark alone, and a block that reads them', async () => {
    const { page, close } = await openState(tokens.viewer);
    const section = page.locator('section', { has: page.getByRole('heading', { name: 'Outputs' }) });
    await section.locator('table.outputs tbody tr').first().waitFor();
    const rows = await section.locator('table.outputs tbody tr').evaluateAll((trs) =>
      trs.map((tr) => [...tr.querySelectorAll('th, td')].map((c) => (c.textContent ?? '').trim())),
    );
    expect(rows).toEqual([
      ['endpoint', 'string', 'db.example.com'],
      ['password', 'string', 'sensitive'],
      ['ports', 'tuple([number, number])', '[5432,5433]'],
    ]);
    const hcl = (await page.getByLabel('terraform_remote_state block', { exact: true }).textContent()) ?? '';
    expect(hcl).toContain('data "terraform_remote_state" "db" {');
    expect(hcl).toContain(`address  = "${server.base}/api/tf-states/db/outputs/state"`);
    expect(hcl).toContain('password = var.hegemony_token');
    expect(hcl).not.toContain(tokens.viewer);
    expect(await page.content()).not.toContain(SECRET);
    await accessible(page, "a state's outputs");
    await keyboardReachable(page, "a state's outputs");
    // The block is copied by keyboard.
    await tabTo(page, 'Copy terraform_remote_state block');
    await screenshotOf(section, 'outputs');

    // Pasted into a consumer configuration, the block reads the plain outputs with a
    // viewer's token; the sensitive one is not there.
    const consumer = new Tf(server, 'unused', tokens.viewer);
    folders.push(consumer);
    writeFileSync(
      join(consumer.dir, 'main.tf'),
      `${hcl}\noutput "endpoint" {\n  value = data.terraform_remote_state.db.outputs.endpoint\n}\noutput "names" {\n  value = keys(data.terraform_remote_state.db.outputs)\n}\n`,
    );
    consumer.run('init', '-no-color');
    consumer.run('apply', '-auto-approve', '-no-color', '-var', `hegemony_token=${tokens.viewer}`);
    expect(consumer.run('output', '-raw', 'endpoint')).toBe('db.example.com');
    expect(JSON.parse(consumer.run('output', '-json', 'names'))).toEqual(['endpoint', 'ports']);
    expect(server.logs()).not.toContain(SECRET);
    await close();
  });

  it('is not shown to a role the allocation leaves out', async () => {
    const moved = await call(server, tokens.admin, 'PUT', '/api/org/permissions', { 'tf_state:outputs': 'operator' });
    expect(moved.status).toBe(200);
    try {
      const viewer = await openState(tokens.viewer);
      expect(await viewer.page.getByRole('heading', { name: 'Outputs' }).count()).toBe(0);
      await viewer.close();
      const operator = await openState(tokens.operator);
      await operator.page.getByRole('heading', { name: 'Outputs' }).waitFor();
      await operator.close();
    } finally {
      await call(server, tokens.admin, 'PUT', '/api/org/permissions', { 'tf_state:outputs': 'viewer' });
    }
  });
});
