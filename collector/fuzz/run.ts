/**
 * `make fuzz`: runs every fuzz target (targets.ts) under jazzer.js for a bounded time, one
 * after the other, and says what each found.
 *
 *   node collector/fuzz/run.ts --seconds 60 --work ~/.cache/pglog/fuzz [--timeout-ms 2000] [target...]
 *
 * Each target reads the committed seeds (corpus/<target>/) and its working corpus
 * (<work>/corpus/<target>/, where libFuzzer keeps what it learns, so later runs go on from
 * there). An input that breaks a property (crash-*) or runs past the timeout (timeout-*,
 * slow-unit-*) is written to regressions/<target>/, where the unit test
 * collector/test/unit/logformat/fuzz-regressions.test.ts replays it: fix the bug, keep the file.
 *
 * Exit status: 0 when no target found anything, 1 otherwise.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, readdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { parseArgs } from 'node:util';

import { TARGET_NAMES, type TargetName } from './targets.ts';

const HERE = import.meta.dirname;
const SOURCES = resolve(HERE, '../src') + '/';
/** Longest input libFuzzer makes: room for a few real entries (the seeds are at most 4 kB; libFuzzer grows inputs towards this slowly). */
const MAX_LEN = 64 * 1024;

export const corpusDir = (target: string): string => join(HERE, 'corpus', target);
export const regressionsDir = (target: string): string => join(HERE, 'regressions', target);

function findings(dir: string): string[] {
  try {
    return readdirSync(dir).filter((f) => /^(?:crash|timeout|slow-unit|oom|leak)-/.test(f));
  } catch {
    return [];
  }
}

interface Outcome {
  target: TargetName;
  status: number | null;
  found: string[];
}

function runTarget(target: TargetName, seconds: number, timeoutMs: number, work: string): Outcome {
  const jazzerCli = join(dirname(createRequire(import.meta.url).resolve('@jazzer.js/core/package.json')), 'dist', 'cli.js');
  const workCorpus = join(work, 'corpus', target);
  const artifacts = regressionsDir(target);
  mkdirSync(workCorpus, { recursive: true });
  mkdirSync(artifacts, { recursive: true });
  const before = new Set(findings(artifacts));
  const args = [
    '--disable-warning=ExperimentalWarning',
    '--import',
    join(HERE, 'register-strip-types.ts'),
    jazzerCli,
    join(HERE, 'jazzer-entry.mjs'),
    '--fuzzEntryPoint',
    target,
    '--sync',
    '--includes',
    SOURCES,
    '--timeout',
    String(timeoutMs),
    workCorpus,
    corpusDir(target),
    '--',
    `-max_total_time=${seconds}`,
    `-max_len=${MAX_LEN}`,
    `-artifact_prefix=${artifacts}/`,
    '-print_final_stats=1',
  ];
  console.log(`fuzz: ${target}: ${seconds} s, timeout ${timeoutMs} ms per input, corpus ${workCorpus} + ${corpusDir(target)}`);
  const r = spawnSync(process.execPath, args, { stdio: 'inherit' });
  return { target, status: r.status, found: findings(artifacts).filter((f) => !before.has(f)) };
}

function main(): void {
  const { values, positionals } = parseArgs({
    options: {
      seconds: { type: 'string', default: '60' },
      'timeout-ms': { type: 'string', default: '2000' },
      work: { type: 'string' },
    },
    allowPositionals: true,
  });
  const seconds = Number(values.seconds);
  const timeoutMs = Number(values['timeout-ms']);
  if (!Number.isInteger(seconds) || seconds < 1) throw new Error(`--seconds must be a positive integer, got ${values.seconds}`);
  if (!Number.isInteger(timeoutMs) || timeoutMs < 1) throw new Error(`--timeout-ms must be a positive integer, got ${values['timeout-ms']}`);
  if (values.work === undefined) throw new Error('--work DIR is required (the working corpus lives there)');
  const unknown = positionals.filter((t) => !(TARGET_NAMES as string[]).includes(t));
  if (unknown.length > 0) throw new Error(`unknown fuzz target ${unknown.join(', ')}; targets: ${TARGET_NAMES.join(', ')}`);
  const targets = positionals.length > 0 ? (positionals as TargetName[]) : TARGET_NAMES;

  const outcomes = targets.map((t) => runTarget(t, seconds, timeoutMs, resolve(values.work!)));
  console.log('\nfuzz: summary');
  for (const o of outcomes) {
    const what =
      o.found.length > 0
        ? `FOUND ${o.found.map((f) => join(regressionsDir(o.target), f)).join(', ')}`
        : o.status === 0
          ? 'nothing found'
          : `jazzer exited with ${o.status}`;
    console.log(`  ${o.target.padEnd(8)} ${what}`);
  }
  if (outcomes.some((o) => o.found.length > 0 || o.status !== 0)) {
    console.log('fuzz: each finding is now replayed by collector/test/unit/logformat/fuzz-regressions.test.ts; fix the bug and commit the file.');
    process.exitCode = 1;
  }
}

if (import.meta.main) main();
