// Access to the real PostgreSQL logs that scripts/loggen/generate.sh makes (`make logs`).
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

import type { LogFormat } from '../../src/logformat/record.ts';

export interface RunManifest {
  dir: string;
  log_line_prefix: string;
  files: Record<'stderr' | 'csvlog' | 'jsonlog', string>;
  databases: Record<string, string>;
  cyrillic: Record<string, { encoding: string; identifiers: string[]; literals: string[]; messages: string[]; pgbench_parameters: string[] }>;
  statements: { total: number; by_database: Record<string, number>; load_known_total: number; logged_in_files: Record<string, number> };
  errors: { ERROR: Record<string, number>; FATAL: Record<string, number> };
  connections: { received: number; authorized: number; disconnections: number };
  deadlocks: number;
  lock_waits: { pairs: number; still_waiting: number; acquired: number };
  temp_files: number;
  checkpoints: { requested: number; shutdown: number; total_in_log: number };
  auto_explain_plans: { text: number; json: number };
  autovacuum: { tables_awaited: string[] };
}

export interface TestLogs {
  root: string;
  runs: Record<'A' | 'B', RunManifest>;
}

/** The generated test logs; fails loudly (never skips) when `make logs` has not run. */
export function generatedLogs(): TestLogs {
  const root = process.env.PGLOG_TEST_LOGS;
  if (root === undefined || root === '') {
    throw new Error('PGLOG_TEST_LOGS is not set: run the tests through `make test` (it generates real PostgreSQL logs first)');
  }
  const manifest = JSON.parse(readFileSync(join(root, 'manifest.json'), 'utf8')) as { runs: Record<'A' | 'B', RunManifest> };
  return { root, runs: manifest.runs };
}

export const FORMATS: readonly ('stderr' | 'csvlog' | 'jsonlog')[] = ['stderr', 'csvlog', 'jsonlog'];

export function logPath(logs: TestLogs, run: RunManifest, format: LogFormat): string {
  return join(logs.root, run.files[format as 'stderr' | 'csvlog' | 'jsonlog']);
}
