// The canary run (issue 13, "no secret anywhere"): a real `pglog collect` on a `proxy` target,
// so its sshproxy sidecar child and that child's ssh processes run too, with a store password
// written the awkward ways (raw '@' and ':', a percent-encoded blank and '/') and a real SSH key.
// While it collects, and after, no piece of the password and no line of the key may appear in:
// the command line of the collector, the sidecar or any ssh process (/proc/PID/cmdline); the
// environment of the sidecar and its children (/proc/PID/environ: the store URL is withheld from
// them); the collector's whole output (its log and the sidecar's); /metrics. A second collector
// gets the password with a raw blank and '/' (a URL pg cannot use here): its start-up line and
// its STORE_UNAVAILABLE errors must not name any piece of it either.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';

import { type CollectScenario, freePort, privateKeyBodyLines, scrapeMetrics, startCollectScenario } from '@pglog/test-support/collect-scenario.ts';
import { type CollectorProcess, startCollector, waitFor, writeTargetsFile } from '@pglog/test-support/collector-process.ts';
import { descendants } from '@pglog/test-support/process-tree.ts';

function procText(pid: number, file: 'cmdline' | 'environ'): string {
  try {
    return readFileSync(`/proc/${pid}/${file}`, 'utf8').replaceAll('\0', ' ');
  } catch {
    return ''; // ended meanwhile
  }
}

describe('no secret in process arguments, environments, logs or /metrics of a real run through the sidecar', { timeout: 240_000 }, () => {
  let s: CollectScenario;
  let c: CollectorProcess;
  let metricsPort: number;
  const hex = randomBytes(6).toString('hex');
  // Pieces that must never show, and the password as written into the URL.
  const pieces = [`CANARY${hex}`, `Qz7${hex}`, `Wx8${hex}`, `Vy9${hex}`, `Ut6${hex}`];
  // (A raw blank is left to the unit tests: node-postgres then re-encodes the whole URL, which
  // breaks the percent-encoded socket host of the test store.)
  const written = `${pieces[0]}@${pieces[1]}:${pieces[2]}%20${pieces[3]}%2F${pieces[4]}`;
  let keyLines: string[];
  /** Every text seen, by where it was seen. */
  const seen: Array<{ where: string; text: string }> = [];

  const leaks = (text: string): string[] => [...pieces, ...keyLines].filter((p) => text.includes(p));
  /** Each leak with where it was seen and the text around it. */
  const found = (): string[] =>
    seen.flatMap(({ where, text }) =>
      leaks(text).map((p) => `${where}: ${p} in ${JSON.stringify(text.slice(Math.max(0, text.indexOf(p) - 150), text.indexOf(p) + 100))}`),
    );

  before(async () => {
    s = await startCollectScenario({ name: 'secrets' });
    keyLines = privateKeyBodyLines(s.ssh.privateKeyFile);
    const targetsFile = writeTargetsFile(s.work, [
      {
        name: 'db1',
        host: s.ssh.host,
        port: s.ssh.port,
        user: s.ssh.user,
        privateKeyFile: s.ssh.privateKeyFile,
        knownHostsFile: s.ssh.knownHostsFile,
        transport: 'proxy',
        instances: [{ name: 'main', dataDirectory: s.server.dataDirectory, logDirectory: s.server.logDirectory }],
      },
    ]);
    const m = /^(postgres(?:ql)?:\/\/)([^:@/?]+)@/.exec(s.store.url);
    assert.ok(m !== null, s.store.url);
    // Trust authentication over the socket: any password is accepted, so the run really collects.
    const url = `${m[1]}${m[2]}:${written}@${s.store.url.slice(m[0].length)}`;
    metricsPort = await freePort();
    c = startCollector({ targetsFile, storeUrl: url, args: ['--listen', `127.0.0.1:${metricsPort}`, '--batch-ms', '100'], outputFile: s.outputFile });
  });

  after(async () => {
    await s?.dispose();
  });

  test('the sidecar and its ssh processes run, and the store is reached', async () => {
    const tail = (): string => c.output().slice(-3000);
    await waitFor(() => descendants(c.pid).some((pid) => procText(pid, 'cmdline').startsWith('ssh ')), "the sidecar's ssh processes", 60_000, tail);
    // The store was reached with the password: the stream's start is stored before reading.
    await waitFor(() => /stored before reading|resumes at/.test(c.output()), "the stream's start stored in the store", 90_000, tail);
    const sidecars = descendants(c.pid).filter((pid) => procText(pid, 'cmdline').includes(' sshproxy '));
    assert.ok(sidecars.length >= 1, `a sidecar child runs\n${tail()}`);
    for (const pid of [c.pid, ...descendants(c.pid)])
      seen.push({ where: `/proc/${pid}/cmdline (${procText(pid, 'cmdline').slice(0, 60)})`, text: procText(pid, 'cmdline') });
    for (const root of sidecars) {
      for (const pid of [root, ...descendants(root)]) {
        const environ = procText(pid, 'environ');
        seen.push({ where: `/proc/${pid}/environ`, text: environ });
        assert.doesNotMatch(environ, /PGLOG_STORE_URL=/, `pid ${pid} (${procText(pid, 'cmdline').slice(0, 60)}) inherits the store URL`);
      }
    }
    seen.push({ where: '/metrics', text: await scrapeMetrics(metricsPort) });
  });

  test('no piece of the password and no line of the key in any of them, nor in the output', async () => {
    const exited = c.exited;
    c.kill('SIGTERM');
    await exited;
    seen.push({ where: 'collector output', text: c.output() });
    assert.ok(keyLines.length > 0);
    assert.deepEqual(found(), []);
  });

  test("a password with a raw blank and a raw '/' (pg cannot use that URL here): the start-up line and the store errors name no piece of it", async () => {
    const m = /^(postgres(?:ql)?:\/\/)([^:@/?]+)@/.exec(s.store.url);
    assert.ok(m !== null);
    const raw = `${pieces[0]}@${pieces[1]}:${pieces[2]} ${pieces[3]}/${pieces[4]}`;
    const other = startCollector({
      targetsFile: join(s.work, 'targets.yaml'),
      storeUrl: `${m[1]}${m[2]}:${raw}@${s.store.url.slice(m[0].length)}`,
      args: [],
      outputFile: join(s.work, 'raw.log'),
    });
    await waitFor(
      () => /STORE_UNAVAILABLE/.test(other.output()),
      'a store error',
      60_000,
      () => other.output().slice(-3000),
    );
    const exited = other.exited;
    other.kill('SIGTERM');
    await exited;
    seen.length = 0;
    seen.push({ where: 'collector output (raw blank and slash)', text: other.output() });
    assert.deepEqual(found(), []);
  });
});
