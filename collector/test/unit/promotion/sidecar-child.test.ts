// The sshproxy sidecar child never sees the store URL (security review F11): the collector
// runs it with its own environment minus PGLOG_STORE_URL, so neither it nor the ssh processes
// it starts (which talk to remote servers) hold the store's password.
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { test } from 'node:test';

import { createLogger } from '@pglog/common/observability/logger.ts';

import { createCollectorMetrics } from '../../../src/observability/metrics.ts';
import { SidecarChild, sidecarChildEnv } from '../../../src/promotion/sidecar-child.ts';
import { SidecarClient } from '../../../src/transport/sidecar-client.ts';

test('sidecarChildEnv drops PGLOG_STORE_URL and keeps the rest', () => {
  assert.deepEqual(sidecarChildEnv({ PATH: '/bin', PGLOG_STORE_URL: 'postgresql://pglog:s3cret@db/pglog', HOME: '/h', UNSET: undefined }), {
    PATH: '/bin',
    HOME: '/h',
  });
});

test('the spawned sidecar child has no PGLOG_STORE_URL in its environment', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'pglog-sce-'));
  const out = join(dir, 'env.json');
  const client = await SidecarClient.open({ dir: join(dir, 'sp') });
  const quiet = new Writable({ write: (_c, _e, cb) => cb() });
  // A stand-in for `pglog sshproxy`: writes the environment it was given, then waits.
  const script = `require('node:fs').writeFileSync(${JSON.stringify(out)}, JSON.stringify(process.env)); setInterval(() => {}, 1000);`;
  const env = { ...process.env, PGLOG_STORE_URL: 'postgresql://pglog:canary-5f2a@db.example/pglog' };
  const child = new SidecarChild({
    command: [process.execPath, '-e', script],
    client,
    logLevel: 'error',
    output: quiet,
    privateDir: false,
    env,
    log: createLogger({ level: 'error', destination: quiet }),
    metrics: createCollectorMetrics(),
  });
  try {
    child.start();
    for (let i = 0; i < 200 && !existsSync(out); i++) await new Promise((r) => setTimeout(r, 50));
    const seen = JSON.parse(readFileSync(out, 'utf8')) as Record<string, string>;
    assert.equal(seen['PGLOG_STORE_URL'], undefined);
    assert.ok(!JSON.stringify(seen).includes('canary-5f2a'));
    assert.equal(seen['PATH'], process.env['PATH'], 'the rest is passed on');
  } finally {
    await child.stop(500);
    rmSync(dir, { recursive: true, force: true });
  }
});
