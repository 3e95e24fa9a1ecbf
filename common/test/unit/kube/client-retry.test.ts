// The client's answer to 429 Too Many Requests: it waits for Retry-After (seconds or an HTTP
// date, capped) and sends the request again, a bounded number of times. The real API server
// does not answer 429 on demand, so a local HTTPS stub does, with a certificate made here.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';

import { createKubeClient, retryAfterMs } from '@pglog/common/kube/client.ts';
import type { ResourceType } from '@pglog/common/kube/client-types.ts';
import { isKubeError } from '@pglog/common/kube/errors.ts';

const CONFIG_MAPS: ResourceType = { group: '', version: 'v1', plural: 'configmaps', kind: 'ConfigMap', namespaced: true };

describe('Retry-After', () => {
  test('seconds or an HTTP date, within [0, cap]; missing or unreadable waits a second', () => {
    assert.equal(retryAfterMs('2', 10_000), 2000);
    assert.equal(retryAfterMs('3600', 10_000), 10_000);
    assert.equal(retryAfterMs(undefined, 10_000), 1000);
    assert.equal(retryAfterMs('soon', 10_000), 1000);
    assert.equal(retryAfterMs(new Date(5000).toUTCString(), 10_000, 2000), 3000);
    assert.equal(retryAfterMs(new Date(0).toUTCString(), 10_000, 2000), 0);
  });
});

describe('429 Too Many Requests from an HTTPS stub', () => {
  let server: Server;
  let url: string;
  let cert: string;
  /** What the stub answers next, in order; then 200 with an empty list. */
  let script: Array<{ status: number; retryAfter?: string }> = [];
  const seen: number[] = [];

  before(async () => {
    const dir = mkdtempSync(join(tmpdir(), 'pglog-429-'));
    execFileSync(
      'openssl',
      [
        'req',
        '-x509',
        '-newkey',
        'rsa:2048',
        '-nodes',
        '-keyout',
        'key.pem',
        '-out',
        'cert.pem',
        '-days',
        '2',
        '-subj',
        '/CN=localhost',
        '-addext',
        'subjectAltName=IP:127.0.0.1',
      ],
      { cwd: dir, stdio: 'pipe' },
    );
    cert = readFileSync(join(dir, 'cert.pem'), 'utf8');
    server = createServer({ key: readFileSync(join(dir, 'key.pem')), cert }, (_req, res) => {
      seen.push(Date.now());
      const next = script.shift();
      if (next === undefined) {
        res.writeHead(200, { 'Content-Type': 'application/json' }).end(JSON.stringify({ items: [], metadata: { resourceVersion: '7' } }));
        return;
      }
      res
        .writeHead(next.status, { 'Content-Type': 'application/json', ...(next.retryAfter === undefined ? {} : { 'Retry-After': next.retryAfter }) })
        .end(JSON.stringify({ kind: 'Status', code: next.status, reason: 'TooManyRequests', message: 'slow down' }));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `https://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(() => {
    server.close();
  });

  test('waits for Retry-After, then succeeds', async () => {
    script = [
      { status: 429, retryAfter: '1' },
      { status: 429, retryAfter: '1' },
    ];
    seen.length = 0;
    const client = createKubeClient({ server: url, caCert: cert, token: 't' });
    try {
      const list = await client.list(CONFIG_MAPS, 'default');
      assert.equal(list.resourceVersion, '7');
      assert.equal(seen.length, 3);
      // At least the second the server asked for between tries (no upper bound: the machine may be slow).
      assert.ok(seen[1]! - seen[0]! >= 950 && seen[2]! - seen[1]! >= 950, `waited ${seen[1]! - seen[0]!} and ${seen[2]! - seen[1]!} ms`);
    } finally {
      client.close();
    }
  });

  test('a Retry-After longer than the cap waits the cap; too many 429s fail as KUBE_UNAVAILABLE', async () => {
    script = [{ status: 429, retryAfter: '86400' }];
    seen.length = 0;
    const client = createKubeClient({ server: url, caCert: cert, token: 't' }, { retryAfterCapMs: 50, tooManyRequestsRetries: 2 });
    try {
      assert.equal((await client.list(CONFIG_MAPS, 'default')).resourceVersion, '7');
      assert.equal(seen.length, 2);
      script = [{ status: 429 }, { status: 429 }, { status: 429 }, { status: 429 }];
      seen.length = 0;
      await assert.rejects(client.list(CONFIG_MAPS, 'default'), (e) => isKubeError(e, 'KUBE_UNAVAILABLE') && e.status === 429);
      assert.equal(seen.length, 3, 'the first try and two retries');
    } finally {
      client.close();
    }
  });
});
