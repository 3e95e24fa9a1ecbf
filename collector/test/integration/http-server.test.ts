// The /metrics, /healthz and /readyz server over real HTTP on a free local port.
import assert from 'node:assert/strict';
import { request } from 'node:http';
import { Writable } from 'node:stream';
import { after, before, test } from 'node:test';

import { type Readiness, type RunningHttpServer, startHttpServer } from '@pglog/common/observability/http-server.ts';
import { createLogger } from '@pglog/common/observability/logger.ts';
import { SecretScrubber } from '@pglog/common/observability/redact.ts';

import { createCollectorMetrics } from '../../src/observability/metrics.ts';

interface Reply {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

function call(port: number, method: string, path: string): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, method, path, timeout: 10_000 }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (b: Buffer) => chunks.push(b));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error(`${method} ${path}: no answer within 10 s`)));
    req.on('error', reject);
    req.end();
  });
}

const logLines: string[] = [];
const log = createLogger({
  level: 'info',
  secrets: new SecretScrubber(),
  destination: new Writable({
    write(chunk: Buffer, _e, done): void {
      logLines.push(chunk.toString('utf8'));
      done();
    },
  }),
});
const metrics = createCollectorMetrics({ defaultMetrics: false });
let readiness: Readiness = { ready: false, reasons: ['store: not connected yet', 'targets: 0 of 2 streaming'] };
let server: RunningHttpServer;

before(async () => {
  server = await startHttpServer({ host: '127.0.0.1', port: 0, metrics, ready: () => readiness, log });
});
after(async () => {
  await server.close();
});

test('listens on the port it was given (0: a free one) and says so in the log', { timeout: 30_000 }, () => {
  assert.equal(server.address.host, '127.0.0.1');
  assert.ok(server.address.port > 0);
  assert.ok(logLines.some((l) => l.includes('"http server listening"') && l.includes(`"port":${server.address.port}`)));
});

test('/healthz answers 200 while the event loop runs', { timeout: 30_000 }, async () => {
  const r = await call(server.address.port, 'GET', '/healthz');
  assert.equal(r.status, 200);
  assert.equal(r.body, 'ok\n');
});

test('/readyz is 503 with the reasons, then 200 when ready', { timeout: 30_000 }, async () => {
  let r = await call(server.address.port, 'GET', '/readyz');
  assert.equal(r.status, 503);
  assert.equal(r.body, 'store: not connected yet\ntargets: 0 of 2 streaming\n');
  readiness = { ready: true, reasons: [] };
  r = await call(server.address.port, 'GET', '/readyz?verbose');
  assert.equal(r.status, 200);
  assert.equal(r.body, 'ready\n');
});

test('/metrics serves the registry with its content type', { timeout: 30_000 }, async () => {
  metrics.readBytes('db1', 'main', 42);
  const r = await call(server.address.port, 'GET', '/metrics');
  assert.equal(r.status, 200);
  assert.equal(r.headers['content-type'], metrics.contentType);
  assert.match(r.body, /^pglog_read_bytes_total\{target="db1",instance="main"\} 42$/m);
});

test('HEAD gets the headers without a body; other methods 405; unknown paths 404', { timeout: 30_000 }, async () => {
  const head = await call(server.address.port, 'HEAD', '/metrics');
  assert.equal(head.status, 200);
  assert.equal(head.body, '');
  assert.ok(Number(head.headers['content-length']) > 0);
  const post = await call(server.address.port, 'POST', '/metrics');
  assert.equal(post.status, 405);
  assert.equal(post.headers.allow, 'GET, HEAD');
  const missing = await call(server.address.port, 'GET', '/nope');
  assert.equal(missing.status, 404);
});

test('a second server on a taken port fails with a message naming the address', { timeout: 30_000 }, async () => {
  await assert.rejects(
    startHttpServer({ host: '127.0.0.1', port: server.address.port, metrics, ready: () => readiness, log }),
    /cannot listen on 127\.0\.0\.1:\d+ for \/metrics: .*EADDRINUSE/,
  );
});

test('close() returns promptly even with an idle keep-alive connection open', { timeout: 20_000 }, async () => {
  const other = await startHttpServer({ host: '127.0.0.1', port: 0, metrics, ready: () => readiness, log });
  const { Agent } = await import('node:http');
  const agent = new Agent({ keepAlive: true });
  await new Promise<void>((resolve, reject) => {
    request({ host: '127.0.0.1', port: other.address.port, path: '/healthz', agent }, (res) => {
      res.resume();
      res.on('end', resolve);
    })
      .on('error', reject)
      .end();
  });
  // Without closeIdleConnections() this would wait out the 65 s keep-alive timeout; the
  // test's timeout bounds the wait.
  await other.close();
  agent.destroy();
});
