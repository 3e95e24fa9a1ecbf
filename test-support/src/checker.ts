// Lost and duplicated statements of one seq-load run (seq-load.ts): the numbers the server
// logged (or a given set) against the rows in the store's stable view pglog.statements.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';

import pg from 'pg';

import { DEFAULT_TAG_PREFIX, parseSeqTags } from './seq-load.ts';

export interface CheckResult {
  /** How many distinct numbers should be in the store. */
  expected: number;
  /** How many store rows carry a number of the run (duplicates included). */
  stored: number;
  /** Expected but not stored, ascending. */
  lost: number[];
  /** Stored more than once, ascending (each number once). */
  duplicated: number[];
  /** Stored but never expected, ascending. */
  unexpected: number[];
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/**
 * The numbers of `run` in statement-duration entries of a log text in any format: stderr
 * `statement: SELECT 'tag'`, csvlog with the quote doubled, jsonlog as is. An error's
 * `STATEMENT:` line or jsonlog "statement" field (a statement that did not complete) is not one.
 * The closing quote is required: a file read while the server writes may end inside a tag.
 */
export function loggedStatementTags(text: string, run: string, tagPrefix: string = DEFAULT_TAG_PREFIX): number[] {
  const pattern = new RegExp(`duration: [0-9.]+ ms {2}statement: SELECT '{1,2}${escapeRegExp(tagPrefix)}:${escapeRegExp(run)}:(\\d+)'`, 'g');
  return [...text.matchAll(pattern)].map((m) => Number(m[1]));
}

/** Every regular file under `dir` (recursively: rotated copies may sit in a subdirectory). */
function filesUnder(dir: string): string[] {
  const found: string[] = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) found.push(...filesUnder(path));
    else if (entry.isFile()) found.push(path);
  }
  return found;
}

/**
 * The set of numbers the server logged, from every file in the log directory: live, rotated,
 * copied (logrotate copytruncate leaves the same entries in two files) or gzipped. A number
 * is logged once however many files hold it; duplicates are judged only in the store.
 */
export function loggedNumbers(logDirectory: string, run: string): Set<number> {
  const numbers = new Set<number>();
  for (const file of filesUnder(logDirectory)) {
    let bytes: Buffer;
    try {
      if (statSync(file).size === 0) continue;
      bytes = readFileSync(file);
    } catch {
      continue; // removed (rotated away) while we listed
    }
    if (file.endsWith('.gz')) bytes = gunzipSync(bytes);
    // latin1 maps every byte to one character: the ASCII tags survive any server encoding.
    for (const n of loggedStatementTags(bytes.toString('latin1'), run)) numbers.add(n);
  }
  return numbers;
}

/** Pure comparison of the expected numbers with the numbers found in store rows (one entry per row). */
export function compareNumbers(expected: Iterable<number>, storedRows: readonly number[]): CheckResult {
  const want = new Set(expected);
  const counts = new Map<number, number>();
  for (const n of storedRows) counts.set(n, (counts.get(n) ?? 0) + 1);
  const ascending = (a: number, b: number): number => a - b;
  return {
    expected: want.size,
    stored: storedRows.length,
    lost: [...want].filter((n) => !counts.has(n)).sort(ascending),
    duplicated: [...counts]
      .filter(([, c]) => c > 1)
      .map(([n]) => n)
      .sort(ascending),
    unexpected: [...counts.keys()].filter((n) => !want.has(n)).sort(ascending),
  };
}

function likePattern(text: string): string {
  return text.replace(/[\\%_]/g, '\\$&');
}

/**
 * Compares what the server logged (read from its log files, or the numbers given, e.g. the
 * load's completed set) with the rows in pglog.statements whose query carries the run's tag.
 */
export async function checkStore(storeUrl: string, run: string, logged: { logDirectory: string } | { numbers: number[] }): Promise<CheckResult> {
  const expected = 'numbers' in logged ? logged.numbers : loggedNumbers(logged.logDirectory, run);
  const client = new pg.Client({ connectionString: storeUrl, application_name: 'pglog-test-checker' });
  await client.connect();
  try {
    const tag = `${DEFAULT_TAG_PREFIX}:${run}:`;
    const result = await client.query<{ query: string }>("SELECT query FROM pglog.statements WHERE query LIKE $1 ESCAPE '\\'", [`%${likePattern(tag)}%`]);
    // One number per row: the first tag of the run in its text.
    const storedRows = result.rows.flatMap((row) => parseSeqTags(row.query, run).slice(0, 1));
    return compareNumbers(expected, storedRows);
  } finally {
    await client.end();
  }
}

function listSome(numbers: readonly number[], max = 20): string {
  const shown = numbers.slice(0, max).join(', ');
  return numbers.length > max ? `${shown}, ... (${numbers.length} in all)` : shown;
}

/** A one-paragraph human summary for assertion messages. */
export function formatCheck(r: CheckResult): string {
  const parts = [`expected ${r.expected} distinct statements, the store holds ${r.stored} rows of the run`];
  parts.push(r.lost.length === 0 ? 'none lost' : `${r.lost.length} lost: ${listSome(r.lost)}`);
  parts.push(r.duplicated.length === 0 ? 'none duplicated' : `${r.duplicated.length} duplicated: ${listSome(r.duplicated)}`);
  if (r.unexpected.length > 0) parts.push(`${r.unexpected.length} stored but never logged: ${listSome(r.unexpected)}`);
  return `${parts.join('; ')}.`;
}

/**
 * Waits until every statement the server logged in `run` is in the store (the last batches
 * commit after the load stops), then asserts that none is lost and none duplicated. Returns
 * the summary line for the test's output.
 */
export async function expectStoredOnce(storeUrl: string, name: string, run: string, logDirectory: string, timeoutMs = 30_000): Promise<string> {
  const deadline = Date.now() + timeoutMs;
  let r = await checkStore(storeUrl, run, { logDirectory });
  while ((r.lost.length > 0 || r.expected === 0) && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 200));
    r = await checkStore(storeUrl, run, { logDirectory });
  }
  assert.equal(r.lost.length, 0, `${name}: ${formatCheck(r)}`);
  assert.equal(r.duplicated.length, 0, `${name}: ${formatCheck(r)}`);
  assert.ok(r.expected > 0, `${name}: the server logged nothing of the run`);
  return `${name}: ${formatCheck(r)}`;
}

/**
 * The store catching up with what the server logged in `run`, for a wait loop: `caughtUp` is
 * true once nothing logged is missing (and something was logged), `summary` is the newest
 * check's line for the timeout message, `check` checks once more after the wait.
 */
export function storeCatchUp(
  storeUrl: string,
  run: string,
  logDirectory: string,
): { caughtUp: () => Promise<boolean>; summary: () => string; check: () => Promise<CheckResult> } {
  let summary = '';
  const check = (): Promise<CheckResult> => checkStore(storeUrl, run, { logDirectory });
  return {
    caughtUp: async () => {
      const r = await check();
      summary = formatCheck(r);
      return r.lost.length === 0 && r.expected > 0;
    },
    summary: () => summary,
    check,
  };
}

/** Rows of the run in the store so far; 0 until a collector has created the store's schema. */
export async function storedRows(storeUrl: string, run: string): Promise<number> {
  try {
    return (await checkStore(storeUrl, run, { numbers: [] })).stored;
  } catch (e) {
    if ((e as { code?: string }).code === '42P01') return 0;
    throw e;
  }
}
