// The spec's one change (a receipts bucket for checkout) through the five octo commands,
// against the real server, each command with a provider of its own as each is its own
// process: generate and validate upload nothing under no lock; lock takes it and uploads
// what waited; apply uploads every interval and at the end while a reader sees only the
// previous seal; commit writes its journal file, seals and releases. Then the rows of "When
// it stops part way" the backend can show: a commit that fails before sealing keeps the lock
// and seals nothing new (and running it again seals), and an apply killed mid-way keeps what
// it uploaded up to its last copy and the lock (and `octo unlock` then keeps its journal).

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';

import { AppStateClient, Archive, Lock, NoStateError, OctoApiError, OctoStateProvider, sha256, UnarchivedJournalError, Uploader } from '../src/index.js';
import { journal, repo, Server, startServer, stateDir, tfstate, until } from './harness.js';

const LINEAGE = '6f1c2d3e-0000-4000-8000-checkout0001';
const GENERATE = '1791692243700-a690d91d';
const VALIDATE = '1791692244187-30dd727f';
const LOCK = '1791692253700-032b3e64';
const APPLY = '1791692257972-3e0cd513';
const COMMIT = '1791692267354-d74b1acd';
const MD5 = 'f793c0d6cea01dba9aa521449489482f';

let server: Server;
let alice: AppStateClient;
let bob: AppStateClient;
let reader: AppStateClient;
/** This machine's .octo/. */
let dir: string;
let first: Archive;
let lock: Lock;

const provider = (lockId?: string, warn?: (m: string) => void) =>
  new OctoStateProvider({ client: alice, dir, lockId, checkInIntervalInSeconds: 1, warn });
const serialOf = (b: Buffer | null) => (b ? (JSON.parse(b.toString()) as { serial: number }).serial : null);
const models = (buckets: string[]) => Buffer.from(JSON.stringify({ app: 'shop', buckets }));
/** A module no change here touches: every archive carries it from the first. */
const NETWORK = tfstate(4, '6f1c2d3e-0000-4000-8000-network00001', ['vpc']);

before(async () => {
  server = await startServer();
  const client = (user: string, role: 'viewer' | 'operator') =>
    new AppStateClient({ baseUrl: server.base, token: server.token('acme', user, role), app: 'shop', retry: { baseDelayMs: 20 } });
  alice = client('alice', 'operator');
  bob = client('bob', 'operator');
  // Another app reading this one as a store: content needs tf_state:read (operator).
  reader = client('rita', 'operator');
  dir = stateDir();
  // The app as it was before: one sealed change, with the checkout module's state at serial 1
  // and the network module's, sealed from another machine (this one never had its files).
  const before = new OctoStateProvider({ client: alice, dir: stateDir() });
  // Octo starts from an empty state when the message is exactly this, and only then.
  await assert.rejects(before.getState('checkout.tfstate'), (e: unknown) => {
    assert.ok(e instanceof NoStateError);
    assert.equal(e.message, 'No state found!');
    assert.equal(e.file, 'checkout.tfstate');
    return true;
  });
  await before.lock({ who: 'alice@laptop' });
  await before.saveState('checkout.tfstate', tfstate(1, LINEAGE, []));
  await before.saveState('network.tfstate', NETWORK);
  await before.saveState('models.json', models([]));
  await before.saveState('journal.1791692000000-00000001.commit.json', journal('commit', ['CommandStartedEvent']));
  first = await before.seal();
});

after(async () => {
  await server?.stop();
});

describe('one change, five commands', () => {
  it('generate and validate save into .octo/ and upload nothing under no lock', async () => {
    const generate = provider();
    await generate.saveState('models.json', models(['receipts']));
    await generate.saveState(`journal.${GENERATE}.generate.json`, journal('generate', ['CommandStartedEvent']));
    await generate.saveState(`journal.${GENERATE}.generate.${MD5}.json`, models(['receipts']));
    const validate = provider();
    // validate reads Terraform's state from the seal, and its own intent from the folder.
    assert.equal(serialOf(await validate.getState('checkout.tfstate')), 1);
    assert.deepEqual(JSON.parse((await validate.getState('models.json')).toString()).buckets, ['receipts']);
    await validate.saveState('checkout.tfstate', tfstate(1, LINEAGE, []));
    await validate.saveState(`journal.${VALIDATE}.validate.json`, journal('validate', ['CommandStartedEvent']));
    await validate.saveState(`journal.${VALIDATE}.validate.terraform.json`, Buffer.from('[]'));

    const view = await reader.view();
    assert.equal(view.lock, null);
    assert.equal(view.newest?.commit_id, first.commit_id);
    assert.deepEqual((await reader.archives()).archives.map((a) => a.commit_id), [first.commit_id]);
    assert.deepEqual(JSON.parse((await reader.sealedFile('models.json'))!.toString()).buckets, []);
  });

  it('lock takes the lock, uploads what waited, and refuses another locker naming the holder', async () => {
    const taken = Date.now();
    lock = await provider().lock({ who: 'alice@laptop', info: 'receipts bucket' });
    assert.match(lock.commit_id, /^\d{13}-[0-9a-f]{8}$/);
    assert.ok(Math.abs(Number(lock.commit_id.split('-')[0]) - taken) < 60_000, `commit ID ${lock.commit_id} does not start with the lock's time`);
    assert.ok(lock.commit_id > first.commit_id, 'commit IDs sort in the order the changes started');
    // The lock command's own journal file, written once it holds the lock.
    const locked = provider(lock.lock_id);
    await locked.saveState(`journal.${LOCK}.lock.json`, journal('lock', ['CommandStartedEvent', 'AppLockedEvent']));
    await locked.sync();

    const change = await alice.change(lock.lock_id);
    const journals = change.files.filter((f) => f.kind === 'journal').map((f) => [f.name, f.command]);
    assert.deepEqual(journals, [
      [`journal.${GENERATE}.generate.${MD5}.json`, 'generate'],
      [`journal.${GENERATE}.generate.json`, 'generate'],
      [`journal.${VALIDATE}.validate.json`, 'validate'],
      [`journal.${VALIDATE}.validate.terraform.json`, 'validate'],
      [`journal.${LOCK}.lock.json`, 'lock'],
    ]);
    // The state file validate saved unchanged was not sent again: it is the seal's.
    assert.equal(change.files.find((f) => f.name === 'checkout.tfstate')?.uploaded_in, first.commit_id);
    assert.equal(change.files.find((f) => f.name === 'models.json')?.uploaded_in, lock.commit_id);

    await assert.rejects(bob.lock({ who: 'bob@ci' }), (e: unknown) => {
      assert.ok(e instanceof OctoApiError);
      assert.equal(e.status, 423);
      assert.equal(e.code, 'app_locked');
      assert.deepEqual(e.lock?.holder, { kind: 'user', user: 'alice' });
      assert.equal(e.lock?.who, 'alice@laptop');
      assert.equal(e.lock?.since, lock.since);
      assert.equal((e.lock as Partial<Lock>).lock_id, undefined, 'the lock ID is the holder’s alone');
      return true;
    });
    await assert.rejects(bob.upload(lock.lock_id, { 'models.json': '{}' }), { code: 'app_locked' });
  });

  it('apply uploads every interval and at the end, while a reader sees only the previous seal', async () => {
    const apply = provider(lock.lock_id);
    const ticks: number[][] = [];
    const uploader: Uploader = await apply.startUploads({ onUpload: (sent) => ticks.push(sent.flatMap((f) => (f.serial == null ? [] : [f.serial]))) });
    let serial = 1;
    const entries = ['CommandStartedEvent'];
    const copy = async () => {
      serial += 1;
      entries.push('TerraformProcessOutputEvent');
      await apply.saveState('checkout.tfstate', tfstate(serial, LINEAGE, ['receipts']));
      await apply.saveState(`journal.${APPLY}.apply.json`, journal('apply', entries));
    };
    const writing = setInterval(copy, 200);
    try {
      await until(async () => ticks.length >= 2);
      // Under way: the holder's view has the apply's copies; everyone else, the previous seal.
      assert.ok(serialOf(await alice.changeFile(lock.lock_id, 'checkout.tfstate'))! > 1);
      assert.equal(serialOf(await reader.sealedFile('checkout.tfstate')), 1);
      assert.equal(await reader.sealedFile(`journal.${APPLY}.apply.json`), null);
      assert.equal((await reader.view()).newest?.commit_id, first.commit_id);
    } finally {
      clearInterval(writing);
    }
    await copy();
    const last = await uploader.stop();
    assert.ok(ticks.slice(0, -1).every((t) => t.length === 1), 'each interval sent the module state once');
    assert.deepEqual(last.map((f) => f.name).sort(), ['checkout.tfstate', `journal.${APPLY}.apply.json`]);
    assert.equal(serialOf(await alice.changeFile(lock.lock_id, 'checkout.tfstate')), serial);
    assert.equal(uploader.lastError, null);
  });

  it('a commit that fails before sealing keeps the lock and seals nothing new; running it again seals', async () => {
    const commit = provider(lock.lock_id);
    await commit.saveState('resources-actual.json', Buffer.from('{"receipts":{"arn":"arn:aws:s3:::receipts"}}'));
    await commit.saveState('resources-old.json', Buffer.from('{}'));
    await commit.saveState(`journal.${COMMIT}.commit.json`, journal('commit', ['CommandStartedEvent', 'AppUnlockingEvent']));
    // An old copy of the module's state put back in the folder: the server refuses it, so
    // the seal never starts.
    const good = readFileSync(join(dir, 'checkout.tfstate'));
    await commit.saveState('checkout.tfstate', tfstate(1, LINEAGE, []));
    await assert.rejects(commit.seal(), (e: unknown) => {
      assert.ok(e instanceof OctoApiError);
      assert.equal(e.status, 409);
      assert.equal(e.code, 'stale_serial');
      assert.ok(e.message.length > 0);
      return true;
    });
    // A seal sent with another lock ID touches nothing.
    await assert.rejects(alice.seal('not-the-lock'), { status: 409, code: 'lock_id_mismatch' });
    const held = await reader.view();
    assert.equal(held.lock?.commit_id, lock.commit_id);
    assert.equal(held.newest?.commit_id, first.commit_id);
    assert.equal((await reader.archives()).archives.length, 1);
    assert.ok(existsSync(join(dir, `journal.${COMMIT}.commit.json`)), 'the commit’s journal stays in .octo/ for the retry');

    await commit.saveState('checkout.tfstate', good);
    const sealed = await commit.seal();
    assert.equal(sealed.commit_id, lock.commit_id);
    assert.equal(sealed.ended, 'sealed');
  });

  it('the seal is the newest archive: every file, the journal of every command, the lock released', async () => {
    const view = await reader.view();
    assert.equal(view.lock, null);
    const page = await reader.archives();
    assert.deepEqual(page.archives.map((a) => a.commit_id), [lock.commit_id, first.commit_id]);
    const archive = await reader.archive(lock.commit_id);
    assert.equal(archive.ended, 'sealed');
    assert.deepEqual(archive.holder, { kind: 'user', user: 'alice' });
    const commands = archive.files.filter((f) => f.kind === 'journal').map((f) => f.command);
    assert.deepEqual([...new Set(commands)].sort(), ['apply', 'commit', 'generate', 'lock', 'validate']);
    // The previous change's journal belongs to its own archive, not this one.
    assert.ok(!archive.files.some((f) => f.name.startsWith('journal.1791692000000')));
    assert.deepEqual(
      archive.files.filter((f) => f.kind !== 'journal').map((f) => f.name),
      ['checkout.tfstate', 'models.json', 'network.tfstate', 'resources-actual.json', 'resources-old.json'],
    );
    assert.equal(archive.size, archive.files.reduce((n, f) => n + f.size, 0));
    assert.ok(serialOf(await alice.sealedFile('checkout.tfstate'))! > 2);
    assert.deepEqual(JSON.parse((await alice.sealedFile('models.json'))!.toString()).buckets, ['receipts']);
    // The earlier archive still reads as it was.
    assert.equal(serialOf(await alice.archiveFile(first.commit_id, 'checkout.tfstate')), 1);
    // And on this machine, the same archive, byte for byte, the network module's state it
    // carries from the first change included: .octo/ holds no journal file left over.
    const into = join(dir, 'archives', lock.commit_id);
    assert.deepEqual(readdirSync(into).sort(), archive.files.map((f) => f.name).sort());
    for (const f of archive.files) assert.equal(sha256(readFileSync(join(into, f.name))), f.sha256, f.name);
    assert.deepEqual(readFileSync(join(into, 'network.tfstate')), NETWORK);
    assert.deepEqual(readdirSync(dir).filter((n) => n.startsWith('journal.')), []);
  });
});

describe('when it stops part way', () => {
  it('an apply killed mid-way keeps what it uploaded up to its last copy, and the lock; unlock then keeps its journal', async () => {
    const sealed = serialOf(await alice.sealedFile('checkout.tfstate'))!;
    const change = await provider().lock({ who: 'alice@laptop' });
    const token = server.token('acme', 'alice', 'operator');
    const child = spawn(
      process.execPath,
      [join(repo, 'clients/octo/dist/test/apply-child.js'), server.base, token, 'shop', dir, change.lock_id, LINEAGE, String(sealed + 1)],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let out = '';
    let err = '';
    child.stdout.on('data', (c: Buffer) => (out += c.toString()));
    child.stderr.on('data', (c: Buffer) => (err += c.toString()));
    const uploaded = () => [...out.matchAll(/^uploaded (\S+) (\d+)$/gm)].map((m) => ({ name: m[1], n: Number(m[2]) }));
    try {
      await until(async () => uploaded().filter((u) => u.name === 'checkout.tfstate').length >= 2, 30_000);
    } catch (e) {
      throw new Error(`the apply never uploaded twice:\n${out}\n${err}`, { cause: e });
    } finally {
      child.kill('SIGKILL');
    }
    await new Promise((ok) => (child.exitCode !== null || child.signalCode !== null ? ok(null) : child.once('exit', ok)));
    const lastOf = (name: string) => uploaded().filter((u) => u.name === name).pop()!.n;
    const applyJournal = uploaded().find((u) => u.name.endsWith('.apply.json'))!.name;

    // The lock is still held, and the change has Terraform's record up to the last copy sent.
    const view = await reader.view();
    assert.equal(view.lock?.commit_id, change.commit_id);
    assert.equal(view.newest?.commit_id, lock.commit_id);
    assert.equal(serialOf(await alice.changeFile(change.lock_id, 'checkout.tfstate')), lastOf('checkout.tfstate'));
    const files = (await alice.change(change.lock_id)).files;
    assert.equal(files.find((f) => f.name === applyJournal)?.size, lastOf(applyJournal));
    // Readers still see the seal before it.
    assert.equal(serialOf(await reader.sealedFile('checkout.tfstate')), sealed);

    // octo unlock gives the change up: what it uploaded is sealed too, marked given up.
    const unlock = provider(change.lock_id);
    await unlock.saveState('journal.1791692481268-593d89e5.unlock.json', journal('unlock', ['CommandStartedEvent', 'AppUnlockingEvent']));
    const given: Archive = await unlock.unlock();
    assert.equal(given.ended, 'given_up');
    assert.equal(given.commit_id, change.commit_id);
    assert.deepEqual(given.files.filter((f) => f.kind === 'journal').map((f) => f.command).sort(), ['apply', 'unlock']);
    assert.equal((await reader.view()).lock, null);
    assert.equal((await reader.archives()).archives[0].ended, 'given_up');
  });
});

describe('the local archive', () => {
  it('three apply attempts before a commit leave three apply journals in one archive; archives/ is never uploaded', async () => {
    // Every earlier change is archived on this machine by now: archives/ holds their files.
    assert.ok(readdirSync(join(dir, 'archives')).length >= 2);
    const change = await provider().lock({ who: 'alice@laptop' });
    const sent = (await alice.change(change.lock_id)).files.filter((f) => f.uploaded_in === change.commit_id);
    assert.deepEqual(sent, [], 'the lock uploaded nothing: .octo/ holds only archives/');
    let serial = serialOf(await alice.sealedFile('checkout.tfstate'))!;
    const attempts = ['1791692600000-0000000a', '1791692700000-0000000b', '1791692800000-0000000c'];
    for (const id of attempts) {
      const apply = provider(change.lock_id);
      const uploader = await apply.startUploads();
      serial += 1;
      await apply.saveState('checkout.tfstate', tfstate(serial, LINEAGE, ['receipts']));
      await apply.saveState(`journal.${id}.apply.json`, journal('apply', ['CommandStartedEvent', 'CommandFailedEvent']));
      await uploader.stop();
    }
    const commit = provider(change.lock_id);
    await commit.saveState('journal.1791692900000-0000000d.commit.json', journal('commit', ['CommandStartedEvent']));
    const sealed = await commit.seal();
    const applies = attempts.map((id) => `journal.${id}.apply.json`);
    assert.deepEqual(sealed.files.filter((f) => f.command === 'apply').map((f) => f.name), applies);
    assert.ok(!sealed.files.some((f) => f.name.startsWith('archives')));
    const local = readdirSync(join(dir, 'archives', sealed.commit_id));
    assert.deepEqual(local.filter((n) => n.endsWith('.apply.json')).sort(), applies);
    assert.deepEqual(local.sort(), sealed.files.map((f) => f.name).sort());
  });

  it('a commit that fails to archive stands, releases the lock and leaves the files; lock then refuses them', async () => {
    const change = await provider().lock({ who: 'alice@laptop' });
    const apply = `journal.1791693000000-0000000e.apply.json`;
    const commitJournal = `journal.1791693100000-0000000f.commit.json`;
    const under = provider(change.lock_id);
    await under.saveState(apply, journal('apply', ['CommandStartedEvent']));
    // This machine's change under way: its journal is no leftover, and another lock is
    // refused as held, not for the journal.
    await assert.rejects(provider().lock(), { code: 'app_locked' });
    await under.saveState(commitJournal, journal('commit', ['CommandStartedEvent', 'AppUnlockingEvent']));
    // Something in the way of archives/<commitId>/: the local archive cannot be written.
    const blocker = join(dir, 'archives', change.commit_id);
    writeFileSync(blocker, 'in the way');
    const warnings: string[] = [];
    const sealed = await provider(change.lock_id, (m) => warnings.push(m)).seal();

    assert.equal(warnings.length, 1);
    assert.ok(warnings[0].startsWith(`Failed to archive the state of commit "${change.commit_id}"`), warnings[0]);
    const view = await reader.view();
    assert.equal(view.lock, null, 'the lock is released');
    assert.equal(view.newest?.commit_id, change.commit_id, 'the seal stands');
    assert.equal(sealed.ended, 'sealed');
    assert.deepEqual(
      readdirSync(dir).filter((n) => n.startsWith('journal.')).sort(),
      [apply, commitJournal],
      'the files stay in .octo/',
    );

    // The next lock refuses before locking, naming the journal, and takes nothing.
    await assert.rejects(provider().lock({ who: 'alice@laptop' }), (e: unknown) => {
      assert.ok(e instanceof UnarchivedJournalError);
      assert.equal(e.message, `State holds the journal of a run that was never archived: ${commitJournal}! Move or delete these files, then lock again.`);
      assert.deepEqual(e.files, [apply, commitJournal]);
      return true;
    });
    assert.equal((await reader.view()).lock, null);
    assert.equal((await reader.archives()).archives[0].commit_id, change.commit_id);

    // Moved aside as the message says, the next change starts.
    rmSync(blocker);
    const kept = join(dir, 'archives', change.commit_id);
    mkdirSync(kept);
    for (const name of [apply, commitJournal]) renameSync(join(dir, name), join(kept, name));
    const next = await provider().lock({ who: 'alice@laptop' });
    assert.equal((await alice.change(next.lock_id)).files.filter((f) => f.kind === 'journal').length, 0);
    await provider(next.lock_id).unlock();
  });
});
