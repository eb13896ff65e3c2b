// What the browser tests drive: the real `hegemony-state serve` (the debug binary that
// `make build` makes, with the pages embedded) on a free loopback port and a fresh data
// folder, tokens from its own `token create`, real Terraform (1.11 on PATH) in scratch
// folders, and Debian's Chromium through playwright-core, headless, calling nowhere but
// the server. axe-core runs inside the same pages.

import { ChildProcess, execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

import { Browser, BrowserContext, chromium, Locator, Page } from 'playwright-core';
import { expect } from 'vitest';

export const repo = resolve(__dirname, '../..');
const bin = process.env.HEGEMONY_BIN ?? join(repo, 'target/debug/hegemony-state');

/** Where screenshots go, when they are being retaken (`make screenshots`). */
const shots = process.env.HEGEMONY_SCREENSHOTS ? resolve(process.env.HEGEMONY_SCREENSHOTS) : null;

export interface Server {
  base: string;
  dataDir: string;
  /** The first admin token, as the server printed it on its first start. */
  firstToken: string;
  /** What the server printed on its first start. */
  welcome: string;
  stop(): Promise<void>;
  token(org: string, user: string, role: 'viewer' | 'operator' | 'admin'): string;
  /** Revokes `user`'s tokens with `token revoke`, as an admin of the machine would. */
  revoke(user: string): void;
  platformToken(): string;
  logs(): string;
}

/** Starts the server on a fresh data folder; `env` adds settings. */
export async function startServer(env: Record<string, string> = {}): Promise<Server> {
  const dir = mkdtempSync(join(tmpdir(), 'hegemony-web-'));
  const dataDir = join(dir, 'data');
  const childEnv: NodeJS.ProcessEnv = { ...process.env, RUST_LOG: 'info', ...env };
  delete childEnv.HEGEMONY_TF_STATE_ENCRYPTION_KEY;
  delete childEnv.HEGEMONY_TF_STATE_MAX_BYTES;
  Object.assign(childEnv, env);
  const child: ChildProcess = spawn(bin, ['serve', '--listen', '127.0.0.1:0', '--data-dir', dataDir], {
    env: childEnv,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  let stdout = '';
  // Ready once it listens and has printed its whole welcome (a new store's, on stdout,
  // which reaches us on its own pipe, so in either order).
  const base = await new Promise<string>((ok, fail) => {
    const timer = setTimeout(() => fail(new Error(`the server did not start:\n${stderr}`)), 20_000);
    const check = () => {
      const found = /listening on (http:\/\/[0-9.:]+)/.exec(stderr);
      if (found && stdout.includes('terraform init -backend-config=backend.hcl')) {
        clearTimeout(timer);
        ok(found[1]);
      }
    };
    child.stderr!.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
      check();
    });
    child.stdout!.on('data', (chunk: Buffer) => {
      stdout += chunk.toString();
      check();
    });
    child.on('exit', (code) => fail(new Error(`the server exited (${code}):\n${stderr}`)));
  });
  // A binary built before web/dist (or not at all since) serves the how-to page: say so at
  // once rather than let every test time out looking for the sign-in form.
  const root = await (await fetch(`${base}/`)).text();
  if (!root.includes('<div id="app">')) {
    child.kill('SIGTERM');
    rmSync(dir, { recursive: true, force: true });
    throw new Error(`${bin} serves no built pages at /: run \`make web build\` first (it answered:\n${root.slice(0, 300)})`);
  }
  const firstToken = /shown only this once:\s+(\S+)/.exec(stdout)?.[1] ?? '';
  const tokenCreate = (args: string[]) => {
    const out = execFileSync(bin, ['token', 'create', ...args, '--data-dir', dataDir], { env: childEnv, stdio: 'pipe' });
    return out.toString().trim().split('\n').pop()!.trim();
  };
  return {
    base,
    dataDir,
    firstToken,
    welcome: stdout,
    logs: () => stderr,
    token: (org, user, role) => tokenCreate(['--org', org, '--user', user, '--role', role]),
    platformToken: () => tokenCreate(['--platform']),
    revoke: (user) => {
      const listed = JSON.parse(
        execFileSync(bin, ['token', 'list', '--json', '--data-dir', dataDir], { env: childEnv }).toString(),
      ) as { id: string; user: string }[];
      for (const t of listed.filter((t) => t.user === user)) {
        execFileSync(bin, ['token', 'revoke', t.id, '--data-dir', dataDir], { env: childEnv, stdio: 'pipe' });
      }
    },
    stop: async () => {
      child.kill('SIGTERM');
      await new Promise((ok) => (child.exitCode !== null ? ok(null) : child.once('exit', ok)));
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** A call to the API, for setting up what a test then looks at in the browser. */
export async function call(server: Server, token: string, method: string, path: string, body?: unknown) {
  const response = await fetch(server.base + path, {
    method,
    headers: { Authorization: `Bearer ${token}`, 'Content-Type': 'application/json' },
    body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await response.text();
  return { status: response.status, text, json: () => JSON.parse(text) };
}

/** A minimal Terraform state document. */
export function stateDoc(serial: number, lineage: string, value: string): string {
  return `{\n  "version": 4,\n  "terraform_version": "1.11.4",\n  "serial": ${serial},\n  "lineage": "${lineage}",\n  "outputs": {\n    "v": {"value": "${value}", "type": "string"}\n  },\n  "resources": [],\n  "check_results": null\n}\n`;
}

/** A Terraform working folder whose http backend is one state on the server. */
export class Tf {
  readonly dir = mkdtempSync(join(tmpdir(), 'hegemony-tf-'));

  constructor(
    server: Server,
    state: string,
    private token: string,
    backend?: Record<string, string>,
  ) {
    const base = `${server.base}/api/tf-states/${state}`;
    const b = backend ?? {
      address: `${base}/state`,
      lock_address: `${base}/lock`,
      unlock_address: `${base}/lock`,
      lock_method: 'POST',
      unlock_method: 'DELETE',
      username: 'tester',
    };
    writeFileSync(join(this.dir, 'cli.tfrc'), '');
    writeFileSync(
      join(this.dir, 'backend.hcl'),
      Object.entries(b)
        .map(([k, v]) => `${k} = "${v}"`)
        .concat('retry_max = 0')
        .join('\n') + '\n',
    );
    this.config('one');
  }

  /** `terraform_data` and an output: no provider download needed. */
  config(value: string) {
    writeFileSync(
      join(this.dir, 'main.tf'),
      `terraform {\n  backend "http" {}\n}\nvariable "value" {\n  default = "${value}"\n}\nresource "terraform_data" "x" {\n  input = var.value\n}\noutput "value" {\n  value = terraform_data.x.output\n}\n`,
    );
  }

  env(): NodeJS.ProcessEnv {
    return {
      ...process.env,
      TF_CLI_CONFIG_FILE: join(this.dir, 'cli.tfrc'),
      TF_HTTP_PASSWORD: this.token,
      TF_IN_AUTOMATION: '1',
      TF_INPUT: '0',
      CHECKPOINT_DISABLE: '1',
      NO_COLOR: '1',
    };
  }

  /** Runs terraform; throws with its output when it fails. */
  run(...args: string[]): string {
    try {
      return execFileSync('terraform', args, { cwd: this.dir, env: this.env(), stdio: 'pipe' }).toString();
    } catch (e) {
      const err = e as { stdout?: Buffer; stderr?: Buffer };
      throw new Error(`terraform ${args.join(' ')} failed:\n${err.stdout}\n${err.stderr}`);
    }
  }

  init() {
    return this.run('init', '-no-color', '-backend-config=backend.hcl');
  }

  /** `terraform console`, which holds the state's lock until its input closes. */
  holdLock(): ChildProcess {
    return spawn('terraform', ['console'], { cwd: this.dir, env: this.env(), stdio: ['pipe', 'pipe', 'pipe'] });
  }

  remove() {
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** Waits until `check` is true, for at most `ms`. */
export async function until(check: () => Promise<boolean>, ms = 20_000): Promise<void> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error('gave up waiting');
}

/**
 * Debian's Chromium, headless, with the flags that keep it from calling out: these on top of
 * the ones playwright-core always passes (no background networking, no component updates,
 * its own `--disable-features` list, which a second such flag here would replace).
 */
export async function launch(): Promise<Browser> {
  return chromium.launch({
    executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
    headless: true,
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      '--disable-domain-reliability',
      '--disable-client-side-phishing-detection',
      '--no-pings',
    ],
  });
}

/**
 * A fresh browser context (its own sessionStorage) on the server; every Content-Security-
 * Policy violation and page error is collected, and the test fails on any.
 */
export async function open(browser: Browser, server: Server): Promise<{ context: BrowserContext; page: Page; problems: string[] }> {
  const context = await browser.newContext({ baseURL: server.base, acceptDownloads: true, viewport: { width: 1280, height: 860 } });
  const page = await context.newPage();
  const problems: string[] = [];
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  page.on('console', (m) => {
    if (m.type() === 'error' && !/status of 4\d\d/.test(m.text())) problems.push(`console: ${m.text()}`);
  });
  return { context, page, problems };
}

/**
 * Signs in with `token` on the sign-in page, which lands on the org's overview; then, unless
 * `then` is 'overview', opens the list of states from the sidebar, where most tests begin.
 */
export async function signIn(page: Page, token: string, then: 'states' | 'overview' = 'states') {
  await page.goto('/sign-in');
  await page.getByLabel('Personal access token').fill(token);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('heading', { name: 'Overview', level: 1 }).waitFor();
  expect(new URL(page.url()).pathname).toBe('/');
  if (then === 'overview') return;
  await page.getByRole('navigation', { name: 'Sidebar' }).getByRole('link', { name: 'Terraform States' }).click();
  await page.getByRole('heading', { name: 'Terraform States' }).waitFor();
}

const axeSource = readFileSync(join(repo, 'web/node_modules/axe-core/axe.min.js'), 'utf8');

/**
 * axe-core's check of the page as it is: no serious or critical violation. The script is
 * evaluated through the browser's debugging protocol, so the page's CSP stays as served.
 */
export async function accessible(page: Page, what: string) {
  await page.evaluate(axeSource);
  const violations = await page.evaluate(async () => {
    const axe = (window as unknown as { axe: { run: (c: unknown) => Promise<{ violations: { id: string; impact: string; nodes: { target: string[] }[] }[] }> } }).axe;
    const result = await axe.run(document);
    return result.violations
      .filter((v) => v.impact === 'serious' || v.impact === 'critical')
      .map((v) => `${v.id} (${v.impact}): ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`);
  });
  expect(violations, `axe on ${what}`).toEqual([]);
}

/** Saves a screenshot for docs/images when they are being retaken. */
export async function screenshot(page: Page, name: string) {
  if (!shots) return;
  // No focus ring left by a keyboard check in the picture.
  await page.evaluate(() => {
    (document.activeElement as HTMLElement | null)?.blur();
    window.scrollTo(0, 0);
    // Nor a table left scrolled sideways by it.
    document.querySelectorAll('.scroll').forEach((el) => (el.scrollLeft = 0));
  });
  await page.screenshot({ path: join(shots, `${name}.png`), fullPage: false });
}

/** Saves a screenshot of one part of a page (a section below the fold), when retaken. */
export async function screenshotOf(part: Locator, name: string) {
  if (!shots) return;
  await part.evaluate(() => (document.activeElement as HTMLElement | null)?.blur());
  await part.screenshot({ path: join(shots, `${name}.png`) });
}

/**
 * Moves the focus with Tab, as a keyboard user does, until it is on the control named
 * `name`; fails when 100 presses never get there.
 */
export async function tabTo(page: Page, name: string | RegExp) {
  for (let i = 0; i < 100; i++) {
    await page.keyboard.press('Tab');
    const focused = await page.evaluate(() => {
      const el = document.activeElement as HTMLElement | null;
      if (!el) return '';
      return el.getAttribute('aria-label') || el.textContent?.trim() || '';
    });
    if (typeof name === 'string' ? focused === name : name.test(focused)) return;
  }
  throw new Error(`Tab never reached ${name}`);
}

/**
 * Every visible, enabled control of the page (or of the open dialog, which keeps the
 * focus inside it) is reached by pressing Tab: nothing needs a mouse.
 */
export async function keyboardReachable(page: Page, what: string) {
  const count = await page.evaluate(() => {
    const root = document.querySelector('dialog[open]') ?? document;
    const controls = [...root.querySelectorAll<HTMLElement>('a[href], button, input, select, textarea, [tabindex]')].filter(
      (el) => el.offsetParent !== null && !(el as HTMLButtonElement).disabled && el.tabIndex >= 0,
    );
    controls.forEach((el, i) => el.setAttribute('data-kbd', String(i)));
    return controls.length;
  });
  const seen = new Set<string>();
  for (let i = 0; i < count * 2 + 10 && seen.size < count; i++) {
    await page.keyboard.press('Tab');
    const mark = await page.evaluate(() => document.activeElement?.getAttribute('data-kbd') ?? null);
    if (mark !== null) seen.add(mark);
  }
  const missed = await page.evaluate(
    (reached) =>
      [...document.querySelectorAll<HTMLElement>('[data-kbd]')]
        .filter((el) => !reached.includes(el.getAttribute('data-kbd')!))
        .map((el) => el.outerHTML.slice(0, 80)),
    [...seen],
  );
  await page.evaluate(() => document.querySelectorAll('[data-kbd]').forEach((el) => el.removeAttribute('data-kbd')));
  expect(missed, `controls Tab never reaches on ${what}`).toEqual([]);
  expect(count, `controls on ${what}`).toBeGreaterThan(0);
}
