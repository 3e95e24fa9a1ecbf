/**
 * What must hold for any log_line_prefix and any line given to the prefix compiler and
 * matcher (collector/src/logformat/prefix*.ts): the property checks of the prefix fuzz target,
 * also replayed by collector/test/unit/logformat/fuzz-regressions.test.ts.
 *
 * A fuzz input is the prefix, a NUL byte, and the line (without NUL: the whole input is the
 * prefix, matched against the line `<prefix as written>LOG:  x`).
 *
 * Checked:
 * - compiling either succeeds or throws PglogError PREFIX_UNSUPPORTED whose message quotes
 *   the prefix and says at which position (nothing else, nothing untyped);
 * - matching terminates (bounded by the fuzzer's -timeout) and answers -1 or a position in
 *   the line, with the severity's text start after it and within the line;
 * - the match reads only `bytes[from, to)`: the same line inside a larger buffer, with other
 *   bytes before and after it, gives the same answer and the same fields, relative to `from`;
 * - the fields of a match are read without throwing.
 */
import { isDeepStrictEqual } from 'node:util';

import { isPglogError } from '@pglog/common/errors.ts';

import { type CompiledPrefix, compilePrefix, emptyPrefixFields, type PrefixFields } from '../src/logformat/prefix.ts';

export class PrefixPropertyViolation extends Error {
  constructor(prefix: string, message: string) {
    super(`prefix ${JSON.stringify(prefix)}: ${message}`);
    this.name = 'PrefixPropertyViolation';
  }
}

export interface PrefixInput {
  prefix: string;
  line: Buffer;
}

export function decodePrefixInput(data: Buffer): PrefixInput {
  const nul = data.indexOf(0);
  if (nul < 0) {
    const prefix = data.toString('utf8');
    return { prefix, line: Buffer.concat([data, Buffer.from('LOG:  x')]) };
  }
  return { prefix: data.subarray(0, nul).toString('utf8'), line: data.subarray(nul + 1) };
}

interface MatchResult {
  at: number;
  severity: number;
  textStart: number;
  cutAtQ: boolean;
  fields: PrefixFields | null;
}

function matchAt(compiled: CompiledPrefix, bytes: Buffer, from: number, to: number): MatchResult {
  const fields = emptyPrefixFields();
  const at = compiled.parse(bytes, from, to, fields);
  if (at < 0) return { at, severity: -1, textStart: -1, cutAtQ: false, fields: null };
  return { at: at - from, severity: compiled.severity, textStart: compiled.textStart - from, cutAtQ: compiled.cutAtQ, fields };
}

/** Throws PrefixPropertyViolation (or what the compiler or matcher threw) when a property fails. */
export function checkPrefix(data: Buffer): void {
  const { prefix, line } = decodePrefixInput(data);
  const fail = (message: string): never => {
    throw new PrefixPropertyViolation(prefix, message);
  };
  let compiled: CompiledPrefix;
  try {
    compiled = compilePrefix(prefix);
  } catch (e) {
    if (!isPglogError(e) || e.code !== 'PREFIX_UNSUPPORTED') throw e;
    if (!e.message.includes(JSON.stringify(prefix)) || !/ at position \d+/.test(e.message)) fail(`the error does not say what and where: ${e.message}`);
    return;
  }

  const alone = matchAt(compiled, line, 0, line.length);
  if (alone.at >= 0 && !(alone.at <= alone.textStart && alone.textStart <= line.length)) {
    fail(`match at ${alone.at} with the text starting at ${alone.textStart}, in a line of ${line.length} bytes`);
  }

  // The same line between other bytes: a prefixed line before it, and after it a severity a
  // matcher reading past `to` could take for the line's own.
  const before = Buffer.from('2024-01-02 03:04:05.678 UTC [42] LOG:  ');
  const after = Buffer.from('ERROR:  LOG:  ]@ ');
  const framed = Buffer.concat([before, line, after]);
  const inside = matchAt(compiled, framed, before.length, before.length + line.length);
  if (!isDeepStrictEqual(alone, inside)) fail(`the match depends on bytes outside the line: ${JSON.stringify(inside)} vs ${JSON.stringify(alone)}`);
}
