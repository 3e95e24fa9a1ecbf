// Test helpers for the entry assemblers' tests: the cases every format runs on its fixture
// (any chunking, any resume point), lines that are no entry, and a log built from its lines.
import assert from 'node:assert/strict';
import { it } from 'node:test';

import type { AssemblerOptions } from '../../src/logformat/assembler.ts';
import type { LogFormat } from '../../src/logformat/record.ts';
import { assemble, checkChunking, checkResume } from '../fixtures/asm-harness.ts';

/**
 * Two tests on `data`: the same records however the input is cut (at every offset too unless
 * `everyOffset` is false), and exactly the remaining records when resumed at any entry boundary.
 */
export function itCutsAndResumes(format: LogFormat, data: Buffer, options: AssemblerOptions, everyOffset = true): void {
  void it('gives the same records however the input is cut', () => {
    checkChunking(format, data, options, everyOffset);
  });

  void it('resumes at every entry boundary', () => {
    checkResume(format, data, options);
  });
}

/** A log of these lines, each ended by `\n`. */
export function logOf(lines: readonly string[]): Buffer {
  return Buffer.from(lines.map((line) => `${line}\n`).join(''));
}

/**
 * Assembles `log` and checks each record's severity and message (`UNKNOWN` and the raw line
 * for a line that is no entry) and how many lines counted as malformed.
 */
export function assertSeveritiesAndMessages(
  format: LogFormat,
  log: Buffer,
  expected: readonly (readonly [string, string])[],
  malformed: number,
  why?: string,
): void {
  const { records, stats } = assemble(format, log, {});
  assert.deepEqual(
    records.map((r) => [r.severity, r.message.toString()]),
    expected,
  );
  assert.equal(stats.malformed, malformed, why);
}
