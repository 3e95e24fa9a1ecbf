/**
 * The fuzz targets: one per log format (through the real LogParser) and one for the prefix
 * compiler and matcher. Each takes the fuzzer's bytes and throws when a property fails
 * (log-properties.ts, prefix-properties.ts); jazzer.js records the input that threw, or that
 * ran past -timeout, as a finding. `make fuzz` runs them (run.ts); jazzer-entry.mjs hands
 * them to jazzer.js, which loads fuzz targets only from JavaScript files.
 */
import { checkLog } from './log-properties.ts';
import { checkPrefix } from './prefix-properties.ts';

export const TARGETS = {
  stderr: (data: Buffer): void => checkLog('stderr', data),
  csvlog: (data: Buffer): void => checkLog('csvlog', data),
  jsonlog: (data: Buffer): void => checkLog('jsonlog', data),
  syslog: (data: Buffer): void => checkLog('syslog', data),
  prefix: (data: Buffer): void => checkPrefix(data),
} as const;

export type TargetName = keyof typeof TARGETS;
export const TARGET_NAMES = Object.keys(TARGETS) as TargetName[];
