/**
 * `node scripts/test-report/summary.ts DIR`: after `make test`, the slowest test files of every
 * tier against their budgets (budgets.ts), then the totals of all tiers in the runner's own
 * summary form, so CI's output still ends with the counts. Exits 1 when a file or a tier ran
 * over its budget or a tier's results are missing (a tier that crashed before reporting).
 * DIR holds one `<tier>.jsonl` per tier, written by durations-reporter.ts.
 */
import { readFileSync } from 'node:fs';
import { basename, join, relative } from 'node:path';

import { BUDGETS, type TierBudget } from './budgets.ts';
import type { DurationRecord } from './durations-reporter.ts';

type FileRecord = Extract<DurationRecord, { kind: 'file' }>;
type RunRecord = Extract<DurationRecord, { kind: 'run' }>;

export interface TierResult {
  tier: string;
  files: FileRecord[];
  run: RunRecord | undefined;
}

export interface BudgetVerdict {
  lines: string[];
  overBudget: string[];
}

const SLOWEST = 15;

/** Parses one tier's JSON lines; a line that is not a record is an error naming file and line. */
export function parseTier(tier: string, text: string, path: string): TierResult {
  const files: FileRecord[] = [];
  let run: RunRecord | undefined;
  text.split('\n').forEach((line, i) => {
    if (line.trim() === '') return;
    let rec: DurationRecord;
    try {
      rec = JSON.parse(line) as DurationRecord;
    } catch {
      throw new Error(`${path}:${i + 1}: not a JSON line of the durations reporter`);
    }
    if (rec.kind === 'file') files.push(rec);
    else run = rec;
  });
  return { tier, files, run };
}

const seconds = (ms: number): string => `${(ms / 1000).toFixed(1)} s`;

/** The report of one tier: its slowest files and every budget it broke. Pure. */
export function judgeTier(result: TierResult, budget: TierBudget, root: string): BudgetVerdict {
  const lines: string[] = [];
  const overBudget: string[] = [];
  const tierMs = result.run?.durationMs ?? result.files.reduce((s, f) => s + f.durationMs, 0);
  lines.push(`tier ${result.tier}: ${result.files.length} files in ${seconds(tierMs)} (budget ${budget.tierSeconds} s)`);
  if (result.run === undefined) overBudget.push(`${result.tier}: the run's summary is missing (the runner stopped early)`);
  if (tierMs > budget.tierSeconds * 1000) overBudget.push(`${result.tier}: ${seconds(tierMs)} over the tier's ${budget.tierSeconds} s`);
  const byTime = [...result.files].sort((a, b) => b.durationMs - a.durationMs);
  for (const f of byTime) {
    const limit = budget.files[basename(f.file)] ?? budget.fileSeconds;
    if (f.durationMs > limit * 1000) overBudget.push(`${relative(root, f.file)}: ${seconds(f.durationMs)} over its ${limit} s`);
  }
  for (const f of byTime.slice(0, SLOWEST)) {
    const limit = budget.files[basename(f.file)] ?? budget.fileSeconds;
    const failed = f.fail > 0 ? `  ${f.fail} failed` : '';
    lines.push(`  ${seconds(f.durationMs).padStart(8)}  / ${String(limit).padStart(3)} s  ${relative(root, f.file)}${failed}`);
  }
  return { lines, overBudget };
}

/** The totals over all tiers, in node:test's summary form. Pure. */
export function totals(results: readonly TierResult[]): string[] {
  const sum = (k: 'tests' | 'pass' | 'fail' | 'cancelled' | 'skipped' | 'todo'): number => results.reduce((s, r) => s + (r.run?.[k] ?? 0), 0);
  const ms = results.reduce((s, r) => s + (r.run?.durationMs ?? 0), 0);
  return [
    `ℹ tiers ${results.map((r) => r.tier).join(', ')}`,
    `ℹ tests ${sum('tests')}`,
    `ℹ pass ${sum('pass')}`,
    `ℹ fail ${sum('fail')}`,
    `ℹ cancelled ${sum('cancelled')}`,
    `ℹ skipped ${sum('skipped')}`,
    `ℹ todo ${sum('todo')}`,
    `ℹ duration_ms ${ms.toFixed(3)}`,
  ];
}

function main(argv: readonly string[]): number {
  const dir = argv[0];
  const tiers = argv.slice(1);
  if (dir === undefined || tiers.length === 0) {
    process.stderr.write('usage: node scripts/test-report/summary.ts DIR TIER...\n');
    return 2;
  }
  const results: TierResult[] = [];
  const over: string[] = [];
  const out: string[] = ['', 'Test durations (slowest files; budgets in scripts/test-report/budgets.ts)'];
  for (const tier of tiers) {
    const budget = BUDGETS[tier];
    if (budget === undefined) {
      over.push(`${tier}: no budget in budgets.ts`);
      continue;
    }
    const path = join(dir, `${tier}.jsonl`);
    let text: string;
    try {
      text = readFileSync(path, 'utf8');
    } catch {
      over.push(`${tier}: no results at ${path} (the tier did not run)`);
      continue;
    }
    const result = parseTier(tier, text, path);
    results.push(result);
    const verdict = judgeTier(result, budget, process.cwd());
    out.push(...verdict.lines);
    over.push(...verdict.overBudget);
  }
  if (over.length > 0) out.push('', 'Over budget:', ...over.map((o) => `  ${o}`));
  out.push('', ...totals(results));
  process.stdout.write(`${out.join('\n')}\n`);
  return over.length > 0 ? 1 : 0;
}

if (import.meta.main) process.exitCode = main(process.argv.slice(2));
