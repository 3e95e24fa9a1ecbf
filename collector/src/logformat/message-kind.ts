/**
 * What a log message is, from its first bytes (no decoding): which of EventParser's parsers
 * may apply, and the limits that keep each one away from hostile lengths.
 */
import { startsWithBytes } from './messages/text.ts';

const B_DURATION = Buffer.from('duration: ');
const B_STATEMENT = Buffer.from('statement: ');
const B_EXECUTE = Buffer.from('execute ');
const B_PROCESS = Buffer.from('process ');
const B_CHECKPOINT = Buffer.from('checkpoint ');
const B_RESTARTPOINT = Buffer.from('restartpoint ');
const B_CONNECTION = Buffer.from('connection ');
const B_REPLICATION = Buffer.from('replication connection ');
const B_DISCONNECTION = Buffer.from('disconnection: ');
const B_AUTOMATIC = Buffer.from('automatic ');
const B_TEMPFILE = Buffer.from('temporary file: ');

export type Kind = 'error' | 'none' | 'statement' | 'lock' | 'checkpoint' | 'connection' | 'disconnection' | 'maintenance' | 'temp_file';

/**
 * The longest message parsed into fields of each kind, in bytes: well above what PostgreSQL
 * writes for it (a checkpoint, connection, lock or temporary file message is under 2 KiB; an
 * autovacuum report grows by about 120 bytes per index). A longer one can only come from a
 * role's RAISE LOG: it becomes an `other` event without its fields being looked for, so no
 * field pattern ever runs over megabytes of hostile text (security review F1). Statements and
 * errors carry SQL of any length and are not bounded here.
 */
export const MAX_STRUCTURED_MESSAGE_BYTES: Readonly<Record<Exclude<Kind, 'error' | 'none' | 'statement'>, number>> = {
  lock: 16 * 1024,
  checkpoint: 16 * 1024,
  connection: 16 * 1024,
  disconnection: 16 * 1024,
  temp_file: 16 * 1024,
  maintenance: 256 * 1024,
};

/** Which parser may apply, from the first bytes of the message (no decoding). */
export function classify(m: Buffer): Kind {
  switch (m[0] ?? 0) {
    case 100: // d
      if (startsWithBytes(m, B_DURATION)) return 'statement';
      return startsWithBytes(m, B_DISCONNECTION) ? 'disconnection' : 'none';
    case 115: // s
      return startsWithBytes(m, B_STATEMENT) ? 'statement' : 'none';
    case 101: // e
      return startsWithBytes(m, B_EXECUTE) ? 'statement' : 'none';
    case 112: // p
      return startsWithBytes(m, B_PROCESS) ? 'lock' : 'none';
    case 99: // c
      if (startsWithBytes(m, B_CHECKPOINT)) return 'checkpoint';
      return startsWithBytes(m, B_CONNECTION) ? 'connection' : 'none';
    case 114: // r
      if (startsWithBytes(m, B_RESTARTPOINT)) return 'checkpoint';
      return startsWithBytes(m, B_REPLICATION) ? 'connection' : 'none';
    case 97: // a
      return startsWithBytes(m, B_AUTOMATIC) ? 'maintenance' : 'none';
    case 116: // t
      return startsWithBytes(m, B_TEMPFILE) ? 'temp_file' : 'none';
    default:
      return 'none';
  }
}

export function isErrorSeverity(severity: string): boolean {
  return severity === 'ERROR' || severity === 'FATAL' || severity === 'PANIC' || severity === 'WARNING';
}

const B_OF_TABLE = Buffer.from(' of table "');

/**
 * Autovacuum workers log without a session, so csvlog, jsonlog and the prefix have no database
 * for them; their message names it (`automatic vacuum of table "db.schema.table"`), and the
 * table name is in that database's encoding.
 */
export function maintenanceDatabase(message: Buffer): Buffer | null {
  if (message.length < 24 || message[0] !== 0x61 || !startsWithBytes(message, B_AUTOMATIC)) return null;
  // Looked for in the first bytes only: a message of megabytes is not scanned to its end.
  const at = message.subarray(0, 64 + B_OF_TABLE.length).indexOf(B_OF_TABLE, B_AUTOMATIC.length);
  if (at < 0) return null;
  const from = at + B_OF_TABLE.length;
  const dot = message.indexOf(0x2e, from);
  return dot > from ? message.subarray(from, dot) : null;
}
