// What the client's tests drive: the real `hegemony-state serve` (the debug binary `make
// build` makes) on a free loopback port with a fresh data folder, and tokens from its own
// `token create`, as the web pages' browser tests start it (web/e2e/harness.ts).

import { ChildProcess, execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The repository's root: this file is built into clients/octo/dist/test/. */
export const repo = resolve(dirname(fileURLToPath(import.meta.url)), '../../../..');
const bin = process.env.HEGEMONY_BIN ?? join(repo, 'target/debug/hegemony-state');

export interface Server {
  base: string;
  token(org: string, user: string, role: 'viewer' | 'operator' | 'admin'): string;
  logs(): string;
  stop(): Promise<void>;
}

/** Starts the server on a fresh data folder. */
export async function startServer(): Promise<Server> {
  const dir = mkdtempSync(join(tmpdir(), 'hegemony-octo-'));
  const dataDir = join(dir, 'data');
  const env: NodeJS.ProcessEnv = { ...process.env, RUST_LOG: 'info' };
  delete env.HEGEMONY_TF_STATE_ENCRYPTION_KEY;
  delete env.HEGEMONY_TF_STATE_MAX_BYTES;
  const child: ChildProcess = spawn(bin, ['serve', '--listen', '127.0.0.1:0', '--data-dir', dataDir], {
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  let stdout = '';
  // Ready once it listens and has printed its whole welcome (on stdout, its own pipe, so
  // the two may arrive in either order).
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
    child.on('error', (e) => fail(new Error(`${bin} did not start (${e.message}): run \`make build\` first`)));
    child.on('exit', (code) => fail(new Error(`the server exited (${code}):\n${stderr}`)));
  });
  return {
    base,
    logs: () => stderr,
    token: (org, user, role) => {
      const out = execFileSync(bin, ['token', 'create', '--org', org, '--user', user, '--role', role, '--data-dir', dataDir], {
        env,
        stdio: 'pipe',
      });
      return out.toString().trim().split('\n').pop()!.trim();
    },
    stop: async () => {
      child.kill('SIGTERM');
      await new Promise((ok) => (child.exitCode !== null ? ok(null) : child.once('exit', ok)));
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** A fresh local state folder (Octo's .octo/). */
export function stateDir(): string {
  return mkdtempSync(join(tmpdir(), 'octo-state-'));
}

/** A Terraform state document of one module, as Terraform writes it. */
export function tfstate(serial: number, lineage: string, buckets: string[]): Buffer {
  const resources = buckets.map((b) => ({
    mode: 'managed',
    type: 'terraform_data',
    name: b,
    provider: 'provider["terraform.io/builtin/terraform"]',
    instances: [{ schema_version: 0, attributes: { id: `${b}-id`, input: b } }],
  }));
  const doc = { version: 4, terraform_version: '1.11.4', serial, lineage, outputs: {}, resources, check_results: null };
  return Buffer.from(JSON.stringify(doc, null, 2) + '\n');
}

/** A journal file as Octo writes one: the command's entries, in order. */
export function journal(command: string, types: string[]): Buffer {
  return Buffer.from(JSON.stringify({ command, entries: types.map((type) => ({ type, payload: {} })) }));
}

/** Waits until `check` is true, for at most `ms`. */
export async function until(check: () => Promise<boolean>, ms = 20_000): Promise<void> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error('gave up waiting');
}
