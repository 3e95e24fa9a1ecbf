/**
 * The durations report: the reporter's records from a real node:test run of two small files,
 * and the budget verdicts and totals computed from them.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { promisify } from 'node:util';

import { judgeTier, parseTier, totals } from './summary.ts';

const REPORTER = join(import.meta.dirname, 'durations-reporter.ts');

/** This process's environment without the marker that makes a nested `node --test` report to its parent. */
function childEnv(): NodeJS.ProcessEnv {
  const env = { ...process.env };
  delete env.NODE_TEST_CONTEXT;
  return env;
}

describe('test durations', () => {
  it('the reporter records each file with its wall time and outcomes, and the run', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'pglog-durations-'));
    writeFileSync(
      join(dir, 'slow.test.ts'),
      [
        "import { describe, it, test } from 'node:test';",
        'await new Promise((r) => setTimeout(r, 300));',
        "describe('suite', () => { it('a', () => {}); it('b', { skip: true }, () => {}); });",
        "test('c', () => {});",
      ].join('\n'),
    );
    writeFileSync(join(dir, 'failing.test.ts'), "import { test } from 'node:test';\ntest('x', () => { throw new Error('no'); });\n");
    const out = join(dir, 'tier.jsonl');
    await promisify(execFile)(
      process.execPath,
      [
        '--test',
        '--test-concurrency=1',
        `--test-reporter=${REPORTER}`,
        `--test-reporter-destination=${out}`,
        join(dir, 'slow.test.ts'),
        join(dir, 'failing.test.ts'),
      ],
      { cwd: dir, env: childEnv() },
    ).catch(() => undefined); // exits 1: one test fails on purpose
    const result = parseTier('unit', readFileSync(out, 'utf8'), out);
    const slow = result.files.find((f) => f.file.endsWith('slow.test.ts'));
    const failing = result.files.find((f) => f.file.endsWith('failing.test.ts'));
    assert.ok(slow !== undefined && failing !== undefined, 'both files recorded');
    assert.deepEqual([slow.pass, slow.fail, slow.skipped], [2, 0, 1]);
    assert.ok(slow.durationMs >= 300, `the file's wall time includes its top-level await (${slow.durationMs} ms)`);
    assert.deepEqual([failing.pass, failing.fail], [0, 1]);
    assert.equal(result.run?.tests, 4);
    assert.equal(result.run?.fail, 1);
  });

  it('judges files and the tier against their budgets, named exceptions first', () => {
    const file = (name: string, s: number) => ({
      kind: 'file' as const,
      file: `/r/t/${name}`,
      durationMs: s * 1000,
      pass: 1,
      fail: 0,
      skipped: 0,
      crashed: false,
    });
    const result = {
      tier: 'collector',
      files: [file('quick.test.ts', 5), file('slow.test.ts', 200), file('long.test.ts', 250)],
      run: { kind: 'run' as const, durationMs: 455_000, tests: 3, pass: 3, fail: 0, cancelled: 0, skipped: 0, todo: 0 },
    };
    const verdict = judgeTier(result, { tierSeconds: 400, fileSeconds: 180, files: { 'long.test.ts': 300 } }, '/r');
    assert.deepEqual(verdict.overBudget, ["collector: 455.0 s over the tier's 400 s", 't/slow.test.ts: 200.0 s over its 180 s']);
    assert.match(verdict.lines[1] ?? '', /250\.0 s\s+\/ 300 s\s+t\/long\.test\.ts/);
    assert.deepEqual(judgeTier({ ...result, run: undefined }, { tierSeconds: 9999, fileSeconds: 9999, files: {} }, '/r').overBudget, [
      "collector: the run's summary is missing (the runner stopped early)",
    ]);
  });

  it("adds the tiers up in the runner's summary form", () => {
    const run = (tests: number, fail: number) => ({
      kind: 'run' as const,
      durationMs: 1000,
      tests,
      pass: tests - fail,
      fail,
      cancelled: 0,
      skipped: 0,
      todo: 0,
    });
    const lines = totals([
      { tier: 'unit', files: [], run: run(10, 0) },
      { tier: 'e2e', files: [], run: run(4, 1) },
    ]);
    assert.ok(lines.includes('ℹ tests 14') && lines.includes('ℹ pass 13') && lines.includes('ℹ fail 1'));
  });

  it('names the file and line of a record it cannot read', () => {
    assert.throws(() => parseTier('unit', '{"kind":"run"}\nnot json\n', '/x/unit.jsonl'), /\/x\/unit\.jsonl:2:/);
  });
});
