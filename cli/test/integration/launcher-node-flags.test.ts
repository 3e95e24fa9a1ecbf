// The launcher (cli/bin/pglog) gives `pglog collect` V8 heap flags sized for a
// collector (ADR 0018), leaves a flag NODE_OPTIONS sets to it, lets PGLOG_NODE_FLAGS replace
// its defaults, and gives other commands none; likewise glibc malloc's settings (ADR 0020). Run through the real launcher and the real
// Node: a module preloaded through NODE_OPTIONS reports the process's flags and V8's heap
// limit before main.ts runs, then exits.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';

import { PGLOG } from '@pglog/test-support/cli.ts';
import { runCommand } from '@pglog/test-support/run-command.ts';

interface Probe {
  execArgv: string[];
  heapSizeLimit: number;
  /** glibc malloc's settings in the environment the process started with. */
  malloc: { arenaMax?: string; mmapThreshold?: string };
}

const dir = mkdtempSync(join(tmpdir(), 'pglog-launcher-'));
test.after(() => rmSync(dir, { recursive: true, force: true }));
const probe = join(dir, 'probe.mjs');
// Only in the process that runs main.ts (the launcher's `node -p` version check loads it too).
writeFileSync(
  probe,
  `import v8 from 'node:v8';
if (process.argv[1]?.endsWith('main.ts')) {
  const malloc = { arenaMax: process.env.MALLOC_ARENA_MAX, mmapThreshold: process.env.MALLOC_MMAP_THRESHOLD_ };
  process.stdout.write(JSON.stringify({ execArgv: process.execArgv, heapSizeLimit: v8.getHeapStatistics().heap_size_limit, malloc }));
  process.exit(0);
}
`,
);

/** What the process `pglog ARGS` starts runs with, under `env` (NODE_OPTIONS gets the probe added). */
async function launched(args: string[], env: Record<string, string | undefined> = {}): Promise<Probe> {
  const base = { ...process.env };
  delete base.NODE_OPTIONS;
  delete base.PGLOG_NODE_FLAGS;
  delete base.MALLOC_ARENA_MAX;
  delete base.MALLOC_MMAP_THRESHOLD_;
  const nodeOptions = `${env.NODE_OPTIONS ?? ''} --import=${probe}`.trim();
  const r = await runCommand(PGLOG, args, { env: { ...base, ...env, NODE_OPTIONS: nodeOptions } });
  assert.equal(r.code, 0, r.stderr);
  return JSON.parse(r.stdout) as Probe;
}

/** V8's heap limit in a plain Node started with `flags`, to compare against. */
async function heapLimitWith(flags: string[]): Promise<number> {
  const base = { ...process.env };
  delete base.NODE_OPTIONS;
  const r = await runCommand(process.execPath, [...flags, '-p', 'require("node:v8").getHeapStatistics().heap_size_limit'], { env: base });
  assert.equal(r.code, 0, r.stderr);
  return Number(r.stdout.trim());
}

const tunedFlags = (p: Probe): string[] => p.execArgv.filter((a) => a.startsWith('--max-') || a.startsWith('--heap-'));

test("pglog collect runs with the launcher's heap flags by default, and V8 takes them", async () => {
  const p = await launched(['collect', '--help']);
  assert.deepEqual(tunedFlags(p), ['--max-semi-space-size=4', '--heap-growing-percent=50']);
  assert.equal(p.heapSizeLimit, await heapLimitWith(['--max-semi-space-size=4']));
  assert.notEqual(p.heapSizeLimit, await heapLimitWith([]), 'the semi-space flag changes the heap limit');
});

test("a flag NODE_OPTIONS sets wins over the launcher's (either spelling); the others stay", async () => {
  for (const given of ['--max-semi-space-size=32', '--max_semi_space_size=32']) {
    const p = await launched(['collect', '--help'], { NODE_OPTIONS: given });
    assert.deepEqual(tunedFlags(p), ['--heap-growing-percent=50'], given);
    assert.equal(p.heapSizeLimit, await heapLimitWith(['--max-semi-space-size=32']), given);
  }
  // The operator's tuning sets both heap sizes: the launcher adds only what it leaves out.
  const p = await launched(['collect', '--help'], { NODE_OPTIONS: '--max-old-space-size=256 --max-semi-space-size=16' });
  assert.deepEqual(tunedFlags(p), ['--heap-growing-percent=50']);
  assert.equal(p.heapSizeLimit, await heapLimitWith(['--max-old-space-size=256', '--max-semi-space-size=16']));
});

test("PGLOG_NODE_FLAGS replaces the launcher's flags; empty runs Node's defaults", async () => {
  const none = await launched(['collect', '--help'], { PGLOG_NODE_FLAGS: '' });
  assert.deepEqual(tunedFlags(none), []);
  assert.equal(none.heapSizeLimit, await heapLimitWith([]));
  const own = await launched(['collect', '--help'], { PGLOG_NODE_FLAGS: '--max-semi-space-size=2' });
  assert.deepEqual(tunedFlags(own), ['--max-semi-space-size=2']);
});

test("pglog collect runs with glibc malloc's settings for a collector; the environment's own win", async () => {
  assert.deepEqual((await launched(['collect', '--help'])).malloc, { arenaMax: '2', mmapThreshold: '65536' });
  const given = await launched(['collect', '--help'], { MALLOC_ARENA_MAX: '8', MALLOC_MMAP_THRESHOLD_: '131072' });
  assert.deepEqual(given.malloc, { arenaMax: '8', mmapThreshold: '131072' });
});

test("other commands run with Node's defaults", async () => {
  for (const args of [
    ['parse', '--help'],
    ['report', '--help'],
    ['sshproxy', '--help'],
  ]) {
    const p = await launched(args);
    assert.deepEqual(tunedFlags(p), [], args.join(' '));
    assert.deepEqual(p.malloc, {}, args.join(' '));
  }
});
