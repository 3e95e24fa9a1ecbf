/**
 * A node:test reporter that records how long each test file took and how its tests ended,
 * one JSON line per file, plus one line with the run's own summary. `make test` runs it
 * beside the spec reporter (`--test-reporter=./scripts/test-report/durations-reporter.ts
 * --test-reporter-destination=FILE`), one file per tier; `summary.ts` reads those files and
 * prints the slowest files against their budget. Why a reporter and not junit: node:test
 * reports a file's whole wall time (start-up, hooks, every test) only as the file-level
 * `test:complete` event, which junit leaves out.
 */
import { resolve } from 'node:path';

/** What the reporter writes for each test file (`kind: 'file'`) and for the run (`kind: 'run'`). */
export type DurationRecord =
  | { kind: 'file'; file: string; durationMs: number; pass: number; fail: number; skipped: number; crashed: boolean }
  | { kind: 'run'; durationMs: number; tests: number; pass: number; fail: number; cancelled: number; skipped: number; todo: number };

interface TestEventData {
  file?: string;
  name?: string;
  nesting?: number;
  skip?: unknown;
  todo?: unknown;
  details?: { duration_ms?: number; type?: string; passed?: boolean; error?: unknown };
  counts?: { tests: number; passed: number; failed: number; cancelled: number; skipped: number; todo: number };
  duration_ms?: number;
}

interface Tally {
  pass: number;
  fail: number;
  skipped: number;
}

export default async function* durationsReporter(source: AsyncIterable<{ type: string; data: TestEventData }>): AsyncGenerator<string> {
  const tallies = new Map<string, Tally>();
  const tallyOf = (file: string): Tally => {
    let t = tallies.get(file);
    if (t === undefined) {
      t = { pass: 0, fail: 0, skipped: 0 };
      tallies.set(file, t);
    }
    return t;
  };
  for await (const { type, data } of source) {
    const file = data.file;
    if (type === 'test:summary' && file === undefined && data.counts !== undefined) {
      const c = data.counts;
      const run: DurationRecord = {
        kind: 'run',
        durationMs: data.duration_ms ?? 0,
        tests: c.tests,
        pass: c.passed,
        fail: c.failed,
        cancelled: c.cancelled,
        skipped: c.skipped,
        todo: c.todo,
      };
      yield `${JSON.stringify(run)}\n`;
      continue;
    }
    if (file === undefined) continue;
    // The file itself: process isolation reports it as a nesting-0 test named by the path the
    // runner was given (relative to its working directory, or absolute).
    const isFileLevel = data.nesting === 0 && data.name !== undefined && resolve(data.name) === file;
    if (type === 'test:complete' && isFileLevel) {
      const t = tallyOf(file);
      const crashed = data.details?.passed === false && t.fail === 0;
      const record: DurationRecord = {
        kind: 'file',
        file,
        durationMs: data.details?.duration_ms ?? 0,
        pass: t.pass,
        fail: t.fail + (crashed ? 1 : 0),
        skipped: t.skipped,
        crashed,
      };
      yield `${JSON.stringify(record)}\n`;
      continue;
    }
    if (isFileLevel || data.details?.type === 'suite') continue;
    if (type === 'test:pass') {
      const t = tallyOf(file);
      if (data.skip !== undefined || data.todo !== undefined) t.skipped += 1;
      else t.pass += 1;
    } else if (type === 'test:fail') {
      tallyOf(file).fail += 1;
    }
  }
}
