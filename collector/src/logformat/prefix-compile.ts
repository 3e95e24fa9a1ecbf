/**
 * log_line_prefix compiled: the escapes of the prefix string parsed into the operations the
 * matcher (prefix-matcher.ts) runs, and the PglogError messages for a prefix it cannot match.
 */
import { PglogError } from '@pglog/common/errors.ts';

import type { Op } from './prefix-matcher.ts';
import { OPERATIONS } from './prefix-matcher.ts';

const {
  F_APP,
  F_BTYPE,
  F_DB,
  F_HOST,
  F_LEADER,
  F_LINE,
  F_PID,
  F_QUERYID,
  F_REMOTE,
  F_SESSION,
  F_SQLSTATE,
  F_START,
  F_TAG,
  F_TIME,
  F_TXID,
  F_USER,
  F_VXID,
  K_EPOCH,
  K_INT,
  K_LIT,
  K_OPT_INT,
  K_Q,
  K_SESSION,
  K_SIGNED,
  K_SQLSTATE,
  K_TIME,
  K_TIME_MS,
  K_VAR,
  K_VXID,
} = OPERATIONS;

/** A decimal digit (of a padding width); the matcher keeps its own unexported (see prefix-matcher.ts). */
const isDigit = (c: number | undefined): boolean => c !== undefined && c >= 0x30 && c <= 0x39;

/** What each escape letter becomes: [operation kind, field slot] (as elog.c prints them). */
const ESCAPES: Record<string, [kind: number, field: number]> = {
  a: [K_VAR, F_APP],
  u: [K_VAR, F_USER],
  d: [K_VAR, F_DB],
  r: [K_VAR, F_REMOTE],
  h: [K_VAR, F_HOST],
  b: [K_VAR, F_BTYPE],
  i: [K_VAR, F_TAG],
  p: [K_INT, F_PID],
  P: [K_OPT_INT, F_LEADER],
  t: [K_TIME, F_TIME],
  m: [K_TIME_MS, F_TIME],
  n: [K_EPOCH, F_TIME],
  s: [K_TIME, F_START],
  c: [K_SESSION, F_SESSION],
  l: [K_INT, F_LINE],
  v: [K_VXID, F_VXID],
  x: [K_INT, F_TXID],
  e: [K_SQLSTATE, F_SQLSTATE],
  Q: [K_SIGNED, F_QUERYID],
};

/** The operations of a prefix; throws PglogError('PREFIX_UNSUPPORTED') for what cannot be matched. */
export function compileOps(prefix: string): Op[] {
  const ops: Op[] = [];
  let lit: number[] = [];
  let seenQ = false;
  const flush = (): void => {
    if (lit.length > 0) ops.push({ kind: K_LIT, field: -1, pad: 0, lit: Buffer.from(lit), delim: null, pos: -1 });
    lit = [];
  };
  const bytes = Buffer.from(prefix, 'utf8');
  const charAt = charIndexOfBytes(prefix);
  for (let i = 0; i < bytes.length; i++) {
    const c = bytes[i]!;
    if (c !== 0x25) {
      lit.push(c);
      continue;
    }
    const escPos = charAt[i]!;
    i++;
    if (i >= bytes.length) break; // trailing '%': PostgreSQL prints nothing
    if (bytes[i] === 0x25) {
      lit.push(0x25);
      continue;
    }
    let pad = 0;
    if (bytes[i] === 0x2d || isDigit(bytes[i])) {
      let sign = 1;
      if (bytes[i] === 0x2d) {
        sign = -1;
        i++;
      }
      let n = 0;
      while (i < bytes.length && isDigit(bytes[i])) n = n * 10 + (bytes[i++]! - 0x30);
      if (i >= bytes.length)
        throw new PglogError('PREFIX_UNSUPPORTED', `log_line_prefix ${JSON.stringify(prefix)}: padding without an escape letter at position ${escPos}`);
      pad = sign * n;
    }
    const letter = String.fromCharCode(bytes[i]!);
    if (letter === 'q') {
      // Only the first %q matters: a session ignores them all, other processes stop at it.
      if (!seenQ) {
        seenQ = true;
        flush();
        ops.push({ kind: K_Q, field: -1, pad: 0, lit: null, delim: null, pos: escPos });
      }
      continue;
    }
    const esc = Object.hasOwn(ESCAPES, letter) ? ESCAPES[letter] : undefined;
    if (esc === undefined) {
      const shown = bytes[i]! < 0x80 ? letter : String.fromCodePoint(prefix.codePointAt(charAt[i]!) ?? 0xfffd);
      throw new PglogError('PREFIX_UNSUPPORTED', `log_line_prefix ${JSON.stringify(prefix)}: unknown escape %${shown} at position ${escPos}`);
    }
    flush();
    ops.push({ kind: esc[0], field: esc[1], pad, lit: null, delim: null, pos: escPos });
  }
  flush();
  delimitVariableFields(prefix, ops);
  return ops;
}

/** Positions are reported in characters of the prefix string: the character index of each byte. */
function charIndexOfBytes(prefix: string): number[] {
  const charAt: number[] = [];
  let ci = 0;
  for (const ch of prefix) {
    const n = Buffer.byteLength(ch, 'utf8');
    for (let k = 0; k < n; k++) charAt.push(ci);
    ci += ch.length;
  }
  return charAt;
}

/** Each variable-width field ends at the literal after it; a prefix where none follows is refused. */
function delimitVariableFields(prefix: string, ops: Op[]): void {
  for (let k = 0; k < ops.length; k++) {
    const op = ops[k]!;
    if (op.kind !== K_VAR) continue;
    const next = ops[k + 1];
    if (next === undefined) continue; // ends at the severity
    if (next.kind === K_Q) {
      throw new PglogError(
        'PREFIX_UNSUPPORTED',
        `log_line_prefix ${JSON.stringify(prefix)}: the variable-width escape at position ${op.pos} directly before %q at position ${next.pos} cannot be delimited`,
      );
    }
    if (next.kind !== K_LIT) {
      throw new PglogError(
        'PREFIX_UNSUPPORTED',
        `log_line_prefix ${JSON.stringify(prefix)}: the variable-width escape at position ${op.pos} is followed directly by the escape at position ${next.pos}; they cannot be told apart`,
      );
    }
    op.delim = next.lit;
  }
}
