// The client's retries and errors. The real server cannot be made to answer 429 or 503 on
// demand, so these few run against a small HTTP server of the test's own that answers a
// scripted sequence and records when each request arrived; everything else is tested against
// the real server (scenario.test.ts).

import assert from 'node:assert/strict';
import { createServer, IncomingMessage, Server, ServerResponse } from 'node:http';
import { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';

import { AppStateClient, backoffMs, OctoApiError, retryAfterMs } from '../src/index.js';

type Answer = { status: number; headers?: Record<string, string>; body: string };

let server: Server;
let base: string;
let script: Answer[] = [];
let arrivals: { at: number; method: string; url: string }[] = [];

before(async () => {
  server = createServer((req: IncomingMessage, res: ServerResponse) => {
    arrivals.push({ at: Date.now(), method: req.method!, url: req.url! });
    req.resume();
    req.on('end', () => {
      const answer = script.shift() ?? { status: 500, body: 'script ran out' };
      res.writeHead(answer.status, { 'Content-Type': 'application/json', ...answer.headers });
      res.end(answer.body);
    });
  });
  await new Promise<void>((ok) => server.listen(0, '127.0.0.1', ok));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

after(() => new Promise<void>((ok) => server.close(() => ok())));

const client = (attempts = 4) =>
  new AppStateClient({ baseUrl: base, token: 't', app: 'shop', retry: { attempts, baseDelayMs: 20, maxDelayMs: 50 } });

const archive = JSON.stringify({ commit_id: '1791692253600-5bbc6995', ended: 'sealed', files: [] });
const envelope = (code: string, message: string) => JSON.stringify({ error: { code, message } });

describe('retries', () => {
  it('waits what Retry-After asks on a 429, then takes the answer', async () => {
    script = [{ status: 429, headers: { 'Retry-After': '1' }, body: envelope('too_many_requests', 'slow down') }, { status: 200, body: archive }];
    arrivals = [];
    const sealed = await client().seal('lock-1');
    assert.equal(sealed.commit_id, '1791692253600-5bbc6995');
    assert.equal(arrivals.length, 2);
    assert.ok(arrivals[1].at - arrivals[0].at >= 950, `retried after ${arrivals[1].at - arrivals[0].at} ms, not the 1 s asked`);
    assert.deepEqual(arrivals.map((a) => `${a.method} ${a.url}`), Array(2).fill('POST /api/apps/shop/locks/lock-1/seal'));
  });

  it('retries 5xx with backoff and gives the last refusal with its code when they never stop', async () => {
    script = Array(3).fill({ status: 503, body: envelope('unavailable', 'the store is unavailable') });
    arrivals = [];
    await assert.rejects(client(3).upload('lock-1', { 'models.json': '{}' }), (e: unknown) => {
      assert.ok(e instanceof OctoApiError);
      assert.equal(e.status, 503);
      assert.equal(e.code, 'unavailable');
      assert.equal(e.message, 'the store is unavailable');
      return true;
    });
    assert.equal(arrivals.length, 3);
  });

  it('never retries a 4xx refusal, and carries its code, message and the holder of a lock', async () => {
    const lock = { commit_id: '1791692253600-5bbc6995', holder: { kind: 'user', user: 'alice' }, who: 'alice@laptop', info: '', since: '2026-10-01T12:30:53.600Z' };
    script = [{ status: 423, body: JSON.stringify({ error: { code: 'app_locked', message: 'the app is locked by alice', lock } }) }];
    arrivals = [];
    await assert.rejects(client().lock(), (e: unknown) => {
      assert.ok(e instanceof OctoApiError);
      assert.equal(e.status, 423);
      assert.equal(e.code, 'app_locked');
      assert.deepEqual(e.lock, lock);
      return true;
    });
    assert.equal(arrivals.length, 1);
  });

  it('reads a refusal that is not the envelope as its status alone', async () => {
    script = [{ status: 502, body: '<html>bad gateway</html>' }];
    await assert.rejects(client(1).archives(), { name: 'OctoApiError', status: 502, code: 'http_502', message: 'the server answered 502' });
  });

  it('says the server was unreachable after its attempts', async () => {
    const gone = new AppStateClient({ baseUrl: 'http://127.0.0.1:1', token: 't', app: 'shop', retry: { attempts: 2, baseDelayMs: 5 } });
    await assert.rejects(gone.view(), { status: 0, code: 'unreachable' });
  });
});

describe('backoff', () => {
  const policy = { attempts: 6, baseDelayMs: 100, maxDelayMs: 1000, maxRetryAfterMs: 60_000 };

  it('doubles from the base up to the ceiling, half of it random', () => {
    assert.deepEqual([1, 2, 3, 4, 5].map((n) => backoffMs(n, policy, () => 1)), [100, 200, 400, 800, 1000]);
    assert.deepEqual([1, 2, 5].map((n) => backoffMs(n, policy, () => 0)), [50, 100, 500]);
  });

  it('reads Retry-After as seconds or as a date', () => {
    const now = Date.parse('2026-12-01T10:00:00Z');
    assert.equal(retryAfterMs('3', now), 3000);
    assert.equal(retryAfterMs('Tue, 01 Dec 2026 10:00:02 GMT', now), 2000);
    assert.equal(retryAfterMs('Tue, 01 Dec 2026 09:00:00 GMT', now), 0);
    assert.equal(retryAfterMs(null, now), null);
    assert.equal(retryAfterMs('soon', now), null);
  });
});
