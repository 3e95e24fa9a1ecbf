// The launcher's Node compile cache (cli/src/main.ts): `pglog` keeps the code Node compiled for
// its modules in the user's cache directory, so the next run skips type stripping and
// compiling; NODE_COMPILE_CACHE names another directory and NODE_DISABLE_COMPILE_CACHE=1 turns
// it off. What it saves is measured in docs/benchmarks.md, not here.
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';

import { PGLOG } from '@pglog/test-support/cli.ts';

const dir = mkdtempSync(join(tmpdir(), 'pglog-compile-cache-'));
after(() => rmSync(dir, { recursive: true, force: true }));
const log = join(dir, 'postgresql.log');
writeFileSync(log, '2026-11-21 10:00:00.001 UTC [100] LOG:  checkpoint starting: time\n');

/** Files under `root` (recursively); 0 when it does not exist. */
function files(root: string): number {
  return existsSync(root) ? readdirSync(root, { recursive: true, withFileTypes: true }).filter((e) => e.isFile()).length : 0;
}

function parse(env: Record<string, string>): number {
  const { NODE_COMPILE_CACHE: _cache, NODE_DISABLE_COMPILE_CACHE: _disabled, XDG_CACHE_HOME: _xdg, ...rest } = process.env;
  const out = execFileSync(PGLOG, ['parse', '--summary', '--prefix', '%m [%p] ', log], { env: { ...rest, ...env }, encoding: 'utf8' });
  return (JSON.parse(out) as { entries: number }).entries;
}

test("a run leaves compiled code in pglog's directory under XDG_CACHE_HOME, and the next run reads it", () => {
  const home = join(dir, 'xdg');
  assert.equal(parse({ XDG_CACHE_HOME: home }), 1);
  const cache = join(home, 'pglog', 'node-compile-cache');
  const written = files(cache);
  assert.ok(written > 0, 'compiled modules are cached');
  assert.equal(parse({ XDG_CACHE_HOME: home }), 1);
  assert.equal(files(cache), written, 'a warm cache is read, not written again');
});

test('under HOME/.cache without XDG_CACHE_HOME', () => {
  const home = join(dir, 'home');
  assert.equal(parse({ HOME: home }), 1);
  assert.ok(files(join(home, '.cache', 'pglog', 'node-compile-cache')) > 0);
});

test('NODE_COMPILE_CACHE names the directory; NODE_DISABLE_COMPILE_CACHE=1 turns it off', () => {
  const named = join(dir, 'named');
  const xdg = join(dir, 'unused');
  assert.equal(parse({ NODE_COMPILE_CACHE: named, XDG_CACHE_HOME: xdg }), 1);
  assert.ok(files(named) > 0);
  assert.equal(files(xdg), 0);
  const off = join(dir, 'off');
  assert.equal(parse({ NODE_DISABLE_COMPILE_CACHE: '1', XDG_CACHE_HOME: off }), 1);
  assert.equal(files(off), 0);
});

test('through the launcher a warm run strips no TypeScript: main.ts itself comes from the cache', () => {
  const home = join(dir, 'warm');
  const { NODE_COMPILE_CACHE: _cache, NODE_DISABLE_COMPILE_CACHE: _disabled, XDG_CACHE_HOME: _xdg, ...rest } = process.env;
  const run = (): string[] => {
    // Node's own account of each module's cache lookup, on stderr.
    const r = spawnSync(PGLOG, ['parse', '--summary', '--prefix', '%m [%p] ', log], {
      env: { ...rest, XDG_CACHE_HOME: home, NODE_DEBUG_NATIVE: 'COMPILE_CACHE' },
      encoding: 'utf8',
    });
    assert.equal(r.status, 0, r.stderr);
    return r.stderr.split('\n').filter((l) => l.includes('transpile cache for StrippedTypeScript'));
  };
  run();
  const lookups = run();
  assert.ok(
    lookups.some((l) => l.includes('/cli/src/main.ts') && l.endsWith('success')),
    `main.ts read from the cache:\n${lookups.join('\n')}`,
  );
  assert.deepEqual(
    lookups.filter((l) => !l.endsWith('success')),
    [],
    'every module read from the cache',
  );
});
