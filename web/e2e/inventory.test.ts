// The inventory's pages: the Overview where signing in lands (counts, the charts by provider
// and by type, the largest states, a lock with its age, a state not in the inventory), the
// Resources search (a part of an address as one types, the previous request aborted, the
// exact filters in the address with back and forward, the keyboard from the search box to
// a state, more results than one page), and one set of objects managed by two states (a
// state Terraform applied, its content imported under a second name) on the Conflicts page
// and as a warning on both states' pages, nothing when the read fails. A secret planted in
// the applied resources, and the identities conflicts are found by, appear on none of them.

import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser, Page, Request } from 'playwright-core';

import { accessible, call, keyboardReachable, launch, open, screenshot, screenshotOf, Server, signIn, startServer, tabTo, Tf } from './harness';

const SECRET = 's3cr3t-planted-web-7c1a';

let server: Server;
let browser: Browser;
let admin: string;
let viewer: string;
let tf: Tf;
/** The `id` of every managed instance of `app`: the identities its conflicts are found by. */
let identities: string[];

/** A module under `for_each` with a counted resource, a `for_each` resource holding the
 * secret, and a data source: no provider to download. */
function configure(dir: string) {
  mkdirSync(join(dir, 'net'), { recursive: true });
  writeFileSync(join(dir, 'net/main.tf'), 'resource "terraform_data" "subnet" {\n  count = 2\n  input = count.index\n}\n');
  writeFileSync(
    join(dir, 'shared.tfstate'),
    '{"version":4,"terraform_version":"1.11.4","serial":1,"lineage":"shared","outputs":{"zone":{"value":"z","type":"string"}},"resources":[]}',
  );
  writeFileSync(
    join(dir, 'main.tf'),
    `terraform {
  backend "http" {}
}
module "net" {
  source   = "./net"
  for_each = toset(["east"])
}
resource "terraform_data" "role" {
  for_each = toset(["reader", "writer"])
  input    = { name = each.key, password = "${SECRET}" }
}
data "terraform_remote_state" "shared" {
  backend = "local"
  config  = { path = "\${path.module}/shared.tfstate" }
}
`,
  );
}

/** A state of AWS objects, as a Terraform 1.11 would write it (no provider runs here). */
function awsState(lineage: string, buckets: string[], roles: string[]): string {
  const aws = 'provider["registry.terraform.io/hashicorp/aws"]';
  const resource = (type: string, name: string, id: string, arn: string) => ({
    mode: 'managed',
    type,
    name,
    provider: aws,
    instances: [{ schema_version: 0, attributes: { id, arn }, sensitive_attributes: [] }],
  });
  return JSON.stringify({
    version: 4,
    terraform_version: '1.11.4',
    serial: 1,
    lineage,
    outputs: {},
    resources: [
      ...buckets.map((b) => resource('aws_s3_bucket', b, `acme-${b}`, `arn:aws:s3:::acme-${b}`)),
      ...roles.map((r) => resource('aws_iam_role', r, r, `arn:aws:iam::123456789012:role/${r}`)),
    ],
    check_results: null,
  });
}

beforeAll(async () => {
  server = await startServer();
  browser = await launch();
  admin = server.token('acme', 'ada', 'admin');
  const operator = server.token('acme', 'otto', 'operator');
  viewer = server.token('acme', 'vic', 'viewer');

  tf = new Tf(server, 'app', operator);
  configure(tf.dir);
  tf.init();
  tf.run('apply', '-auto-approve', '-no-color');
  // The same objects come to be managed by a second state: app's content imported as `copy`.
  const content = await call(server, admin, 'GET', '/api/tf-states/app/state');
  expect(content.status).toBe(200);
  identities = content
    .json()
    .resources.flatMap((r: { instances: { attributes: { id?: string } }[] }) => r.instances.map((i) => i.attributes.id))
    .filter((id: string | undefined): id is string => typeof id === 'string');
  expect(identities.length).toBe(4);
  expect((await call(server, operator, 'POST', '/api/tf-states/copy/import', content.text)).status).toBe(201);
  const storage = awsState('lin-storage', ['logs', 'assets'], ['ci']);
  expect((await call(server, operator, 'POST', '/api/tf-states/storage/import', storage)).status).toBe(201);
  // Locked, as Terraform locks it: the overview shows the lock and its age.
  expect(
    (await call(server, operator, 'POST', '/api/tf-states/storage/lock', { ID: 'lock-1', Operation: 'OperationTypeApply', Who: 'otto@laptop' })).status,
  ).toBe(200);
  // OpenTofu-encrypted: kept, but not in the inventory.
  const sealed = '{"serial":3,"lineage":"4e2f-uuid","meta":{"key_provider.pbkdf2.main":"eyJzYWx0IjoiYSJ9"},"encrypted_data":"q83vEjRWeJA=","encryption_version":"v0"}\n';
  expect((await call(server, operator, 'POST', '/api/tf-states/sealed/import', sealed)).status).toBe(201);
});

afterAll(async () => {
  tf?.remove();
  await browser?.close();
  await server?.stop();
});

/** Neither the secret nor an identity is anywhere in the page's text. */
async function nothingSecret(page: Page, what: string) {
  const text = (await page.locator('body').textContent()) ?? '';
  expect(text, what).not.toContain(SECRET);
  for (const id of identities) expect(text, `${what}: identity ${id}`).not.toContain(id);
}

/** The text of each body row of `table`, its cells joined by `|`. */
async function rowsOf(page: Page, table: string): Promise<string[]> {
  return page.locator(`${table} tbody tr`).evaluateAll((rows) =>
    rows.map((r) => [...r.children].map((c) => (c.textContent ?? '').trim()).join('|')),
  );
}

/** Presses Tab until the focus is on the element `selector` names; at most 60 presses. */
async function tabToField(page: Page, selector: string) {
  for (let i = 0; i < 60; i++) {
    await page.keyboard.press('Tab');
    if (await page.evaluate((s) => document.activeElement === document.querySelector(s), selector)) return;
  }
  throw new Error(`Tab never reached ${selector}`);
}

describe('the overview', () => {
  it('is where signing in lands: the counts, both charts, the largest states, a lock with its age, a state not indexed', async () => {
    const { context, page, problems } = await open(browser, server);
    await signIn(page, admin, 'overview');
    const sidebar = page.getByRole('navigation', { name: 'Sidebar' });
    expect(await sidebar.locator('li[aria-current="page"]').textContent()).toBe('Overview');
    const numbers = page.locator('dl.stats');
    const stat = async (name: string) =>
      numbers.locator('div', { has: page.locator('dt', { hasText: new RegExp(`^${name}$`) }) }).locator('dt + dd').textContent();
    const api = (await call(server, admin, 'GET', '/api/overview')).json();
    expect(await stat('States')).toBe('4');
    expect(await stat('Resource instances')).toBe('13');
    expect(await stat('Objects managed by two or more states')).toBe('4');
    expect(await stat('Versions')).toBe(String(api.versions));

    const byProvider = page.getByRole('table', { name: 'By provider (the 20 with most)' });
    expect(await rowsOf(page, 'table.bars:nth-of-type(1)')).toEqual([
      'terraform.io/builtin/terraform|10|',
      'registry.terraform.io/hashicorp/aws|3|',
    ]);
    // Each bar as long as its count says, the largest full width.
    const widths = await byProvider.locator('rect').evaluateAll((rects) => rects.map((r) => r.getAttribute('width')));
    expect(widths).toEqual(['100', '30']);
    expect(await rowsOf(page, 'table.bars:nth-of-type(2)')).toEqual([
      'terraform_data|8|',
      'aws_s3_bucket|2|',
      'terraform_remote_state|2|',
      'aws_iam_role|1|',
    ]);

    const largest = page.getByRole('region', { name: 'Largest states' });
    expect(await largest.getByRole('link').allTextContents()).toEqual(expect.arrayContaining(['app', 'copy', 'storage']));
    const held = page.getByRole('region', { name: 'Locks and holds' });
    expect(await held.getByRole('row', { name: /storage/ }).textContent()).toMatch(/^storageLocked.*otto.*\d+ (second|minute)s?/);
    expect(await page.getByRole('region', { name: 'Not written for 90 days' }).textContent()).toContain(
      'Every state was written in the last 90 days.',
    );
    const unindexed = page.getByRole('region', { name: 'Not in the inventory' });
    expect(await unindexed.getByRole('row').allTextContents()).toEqual(['StateLatest version', 'sealed1']);
    await nothingSecret(page, 'the overview');
    await accessible(page, 'the overview');
    await keyboardReachable(page, 'the overview');
    await screenshot(page, 'overview');

    // A bar's label is a search for what it counts.
    await byProvider.getByRole('link', { name: 'registry.terraform.io/hashicorp/aws' }).click();
    await page.getByRole('heading', { name: 'Resources', level: 1 }).waitFor();
    expect(new URL(page.url()).search).toBe('?provider=registry.terraform.io%2Fhashicorp%2Faws');
    await expect.poll(() => rowsOf(page, 'table.resources')).toHaveLength(3);
    expect(await page.getByLabel(/^Provider/).inputValue()).toBe('registry.terraform.io/hashicorp/aws');
    expect(problems).toEqual([]);
    await context.close();
  });

  it('says what it has not, for an org with nothing yet', async () => {
    const { context, page, problems } = await open(browser, server);
    await signIn(page, server.token('empty', 'eve', 'viewer'), 'overview');
    expect(await page.getByRole('region', { name: 'Resource instances' }).textContent()).toContain(
      'The inventory holds no resource instance yet',
    );
    expect(await page.getByRole('table').count()).toBe(0);
    expect(await page.getByText('No state is locked or held.').count()).toBe(1);
    await accessible(page, 'an empty overview');
    expect(problems).toEqual([]);
    await context.close();
  });
});

describe('the resources search', () => {
  it('finds by a part of the address as one types, aborting the search it replaces, and filters by type', async () => {
    const { context, page, problems } = await open(browser, server);
    await signIn(page, viewer, 'overview');
    await page.getByRole('navigation', { name: 'Sidebar' }).getByRole('link', { name: 'Resources' }).click();
    const status = page.getByRole('status');
    await expect.poll(() => status.textContent()).toBe('13 resource instances.');

    // A search held on its way (the server would answer it at once) is aborted by the next.
    let held: Request | null = null;
    const aborted: string[] = [];
    page.on('requestfailed', (r) => aborted.push(`${new URL(r.url()).search} ${r.failure()?.errorText}`));
    await page.route(
      (url) => url.pathname === '/api/resources' && url.searchParams.get('q') === 'ROLE',
      (route) => {
        held = route.request();
      },
    );
    await tabToField(page, '#filter-q');
    await page.keyboard.type('ROLE');
    await expect.poll(() => held !== null).toBe(true);
    await page.keyboard.type('["w');
    await expect.poll(() => rowsOf(page, 'table.resources')).toEqual([
      'terraform_data.role["writer"]|app|terraform_data|terraform.io/builtin/terraform|root|1',
      'terraform_data.role["writer"]|copy|terraform_data|terraform.io/builtin/terraform|root|1',
    ]);
    expect(aborted).toContain('?q=ROLE&limit=50 net::ERR_ABORTED');
    expect(await status.textContent()).toBe('2 resource instances.');
    expect(new URL(page.url()).search).toBe('?q=ROLE%5B%22w');

    // A part of a module's address finds the instance under it, in each state.
    await page.getByLabel(/^Search addresses/).fill('subnet[1');
    await expect.poll(() => rowsOf(page, 'table.resources')).toEqual([
      'module.net["east"].terraform_data.subnet[1]|app|terraform_data|terraform.io/builtin/terraform|module.net["east"]|1',
      'module.net["east"].terraform_data.subnet[1]|copy|terraform_data|terraform.io/builtin/terraform|module.net["east"]|1',
    ]);
    await accessible(page, 'the resources search');
    await keyboardReachable(page, 'the resources search');
    await screenshot(page, 'resources');

    // The type filter, with the search: nothing matches both; without it, the buckets.
    await page.getByLabel(/^Type/).fill('aws_s3_bucket');
    await expect.poll(() => status.textContent()).toBe('No resource instance matches.');
    expect(new URL(page.url()).search).toBe('?q=subnet%5B1&type=aws_s3_bucket');
    await page.getByLabel(/^Search addresses/).fill('');
    await expect.poll(() => rowsOf(page, 'table.resources')).toEqual([
      'aws_s3_bucket.assets|storage|aws_s3_bucket|registry.terraform.io/hashicorp/aws|root|1',
      'aws_s3_bucket.logs|storage|aws_s3_bucket|registry.terraform.io/hashicorp/aws|root|1',
    ]);
    expect(new URL(page.url()).search).toBe('?type=aws_s3_bucket');

    // Back and forward walk the searches, the fields following the address.
    await page.goBack();
    await expect.poll(() => page.getByLabel(/^Search addresses/).inputValue()).toBe('subnet[1');
    expect(await page.getByLabel(/^Type/).inputValue()).toBe('aws_s3_bucket');
    await expect.poll(() => status.textContent()).toBe('No resource instance matches.');
    await page.goBack();
    await expect.poll(() => page.getByLabel(/^Type/).inputValue()).toBe('');
    await expect.poll(() => rowsOf(page, 'table.resources')).toHaveLength(2);
    await page.goForward();
    await expect.poll(() => page.getByLabel(/^Type/).inputValue()).toBe('aws_s3_bucket');
    expect(await page.getByLabel(/^Search addresses/).inputValue()).toBe('subnet[1');
    await page.goForward();
    await expect.poll(() => page.getByLabel(/^Search addresses/).inputValue()).toBe('');
    expect(await page.getByLabel(/^Type/).inputValue()).toBe('aws_s3_bucket');
    await expect.poll(() => rowsOf(page, 'table.resources')).toHaveLength(2);

    // A linked search opens as it was, a data source marked; the secret is no search's hit.
    await page.goto(`/resources?q=${encodeURIComponent('remote_state')}&state=copy`);
    await expect.poll(() => rowsOf(page, 'table.resources')).toEqual([
      'data.terraform_remote_state.shareddata source|copy|terraform_remote_state|terraform.io/builtin/terraform|root|1',
    ]);
    expect(await page.getByLabel(/^State/).inputValue()).toBe('copy');
    await page.getByLabel(/^State/).fill('');
    await page.getByLabel(/^Search addresses/).fill(SECRET);
    await expect.poll(() => status.textContent()).toBe('No resource instance matches.');
    await page.getByRole('link', { name: 'Clear' }).click();
    await expect.poll(() => status.textContent()).toBe('13 resource instances.');
    await nothingSecret(page, 'every resource instance');
    // A state filter that is no state's name: the server's refusal, in its words.
    await page.getByLabel(/^State/).fill('not/a name');
    await expect.poll(() => page.getByRole('alert').textContent()).toMatch(/.+/);
    expect(await page.locator('table.resources').count()).toBe(0);
    expect(problems).toEqual([]);
    await context.close();
  });

  it('is used from the keyboard: Tab to the search box, type, Enter, Tab to a result, Enter opens its state', async () => {
    const { context, page, problems } = await open(browser, server);
    await signIn(page, viewer, 'overview');
    await page.goto('/resources');
    await expect.poll(() => page.getByRole('status').textContent()).toBe('13 resource instances.');
    await tabToField(page, '#filter-q');
    await page.keyboard.type('logs');
    await page.keyboard.press('Enter');
    await expect.poll(() => rowsOf(page, 'table.resources')).toHaveLength(1);
    expect(new URL(page.url()).search).toBe('?q=logs');
    await tabTo(page, 'storage');
    await page.keyboard.press('Enter');
    await page.getByRole('heading', { name: 'storage', level: 1 }).waitFor();
    // Back from the state, the search is where it was.
    await page.goBack();
    await expect.poll(() => rowsOf(page, 'table.resources')).toHaveLength(1);
    expect(await page.getByLabel(/^Search addresses/).inputValue()).toBe('logs');
    expect(problems).toEqual([]);
    await context.close();
  });

  it('reads more results than one page, a page at a time, and moves the focus to the first new one', async () => {
    const token = server.token('big', 'bo', 'operator');
    const buckets = Array.from({ length: 120 }, (_, i) => `b${String(i).padStart(3, '0')}`);
    expect((await call(server, token, 'POST', '/api/tf-states/fleet/import', awsState('lin-fleet', buckets, []))).status).toBe(201);
    const { context, page, problems } = await open(browser, server);
    await signIn(page, token, 'overview');
    await page.goto('/resources?type=aws_s3_bucket');
    const rows = page.locator('table.resources tbody tr');
    await expect.poll(() => rows.count()).toBe(50);
    expect(await page.getByRole('status').textContent()).toBe('50 resource instances shown; more below.');
    await page.getByRole('button', { name: 'More results' }).click();
    await expect.poll(() => rows.count()).toBe(100);
    expect(await rows.nth(50).textContent()).toContain('aws_s3_bucket.b050');
    expect(await page.evaluate(() => document.activeElement?.closest('tr')?.querySelector('code')?.textContent)).toBe('aws_s3_bucket.b050');
    await page.getByRole('button', { name: 'More results' }).click();
    await expect.poll(() => rows.count()).toBe(120);
    expect(await page.getByRole('button', { name: 'More results' }).count()).toBe(0);
    expect(await page.getByRole('status').textContent()).toBe('120 resource instances.');
    expect(new Set(await rows.locator('code').allTextContents()).size).toBe(120);
    expect(problems).toEqual([]);
    await context.close();
  });
});

describe('objects managed by two states', () => {
  it('are listed on the Conflicts page, each with its states linked', async () => {
    const { context, page, problems } = await open(browser, server);
    await signIn(page, viewer, 'overview');
    await page.getByRole('link', { name: 'See the conflicts' }).click();
    await page.getByRole('heading', { name: 'Objects managed by two or more states', level: 1 }).waitFor();
    expect(await page.getByRole('status').textContent()).toBe('4 objects are managed by two or more states.');
    const groups = page.locator('ol.conflicts > li');
    expect(await groups.locator('h2').allTextContents()).toEqual(Array(4).fill('A terraform_data in app and copy'));
    const addresses = await groups.evaluateAll((items) =>
      items.map((li) => [...li.querySelectorAll('tbody tr')].map((r) => (r.textContent ?? '').trim())),
    );
    expect(addresses).toEqual([
      ['appmodule.net["east"].terraform_data.subnet[0]1', 'copymodule.net["east"].terraform_data.subnet[0]1'],
      ['appmodule.net["east"].terraform_data.subnet[1]1', 'copymodule.net["east"].terraform_data.subnet[1]1'],
      ['appterraform_data.role["reader"]1', 'copyterraform_data.role["reader"]1'],
      ['appterraform_data.role["writer"]1', 'copyterraform_data.role["writer"]1'],
    ]);
    await nothingSecret(page, 'the conflicts');
    await accessible(page, 'the conflicts');
    await keyboardReachable(page, 'the conflicts');
    await screenshot(page, 'conflicts');
    await groups.first().getByRole('link', { name: 'copy' }).click();
    await page.getByRole('heading', { name: 'copy', level: 1 }).waitFor();
    // Reached from the Resources page too.
    await page.goto('/resources');
    await page.getByRole('link', { name: 'Objects managed by two or more states' }).click();
    await page.getByRole('heading', { name: 'Objects managed by two or more states', level: 1 }).waitFor();
    expect(problems).toEqual([]);
    await context.close();
  });

  it("are a warning on both states' pages, naming the other state, and nothing on a state with none", async () => {
    const { context, page, problems } = await open(browser, server);
    await signIn(page, viewer, 'overview');
    const expected = [
      'module.net["east"].terraform_data.subnet[0]',
      'module.net["east"].terraform_data.subnet[1]',
      'terraform_data.role["reader"]',
      'terraform_data.role["writer"]',
    ];
    for (const [here, there] of [
      ['app', 'copy'],
      ['copy', 'app'],
    ]) {
      await page.goto(`/states/${here}`);
      await page.getByRole('heading', { name: here, level: 1 }).waitFor();
      const warning = page.getByRole('region', { name: 'Managed by another state too' });
      await warning.waitFor();
      expect(await warning.locator('p').textContent()).toContain('4 objects this state manages are managed by another state as well');
      expect(await warning.locator('ul.pairs code').allTextContents()).toEqual(expected);
      await nothingSecret(page, `${here}'s page`);
      await accessible(page, `${here}'s page with its conflicts`);
      if (here === 'app') await screenshotOf(warning, 'conflict-warning');
      await warning.getByRole('link', { name: there }).click();
      await page.getByRole('heading', { name: there, level: 1 }).waitFor();
    }

    // A state in no conflict: its answer has come, and nothing is shown.
    const answered = page.waitForResponse((r) => r.url().endsWith('/api/resources/conflicts?state=storage'));
    await page.goto('/states/storage');
    expect((await answered).status()).toBe(200);
    await page.getByRole('heading', { name: 'storage', level: 1 }).waitFor();
    expect(await page.getByRole('region', { name: 'Managed by another state too' }).count()).toBe(0);
    expect(problems).toEqual([]);
    await context.close();
  });

  it("leave a state's page as it is when the inventory cannot answer", async () => {
    const { context, page, problems } = await open(browser, server);
    await signIn(page, viewer, 'overview');
    // The server's own 503 cannot be had on demand: the browser is answered one in its place.
    await page.route(
      (url) => url.pathname === '/api/resources/conflicts',
      (route) =>
        route.fulfill({
          status: 503,
          contentType: 'application/json',
          headers: { 'Retry-After': '1' },
          body: '{"error":{"code":"unavailable","message":"the store is unavailable; try again"}}',
        }),
    );
    const answered = page.waitForResponse((r) => r.url().includes('/api/resources/conflicts?state=app'));
    await page.goto('/states/app');
    expect((await answered).status()).toBe(503);
    await page.getByRole('heading', { name: 'app', level: 1 }).waitFor();
    await page.getByRole('region', { name: 'Versions' }).waitFor();
    expect(await page.getByRole('region', { name: 'Managed by another state too' }).count()).toBe(0);
    expect(await page.getByRole('alert').count()).toBe(0);
    // The browser logs the refused read itself; nothing else may be logged.
    expect(problems.filter((p) => !/status of 503/.test(p))).toEqual([]);
    await context.close();
  });
});
