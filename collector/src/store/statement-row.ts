/**
 * A statement_events row written straight into its encoder, column by column in
 * STATEMENT_TABLE's order (pure: no I/O).
 *
 * Statements are nearly every row the collector writes, and CopyBinaryEncoder.appendRow pays,
 * for each of a row's 15 fields, a dispatch on the column's type and the checks of a value that
 * could be anything: a third of what encoding a statement row cost (docs/benchmarks.md, the row
 * path). Here the types are known, so each field is one call to the encoder's method for its
 * type, which still checks what the log decides (a pid out of int4's range, a NUL in a name).
 * A value a column cannot take is not written: the row is taken back and -1 returned, and the
 * caller hands the row to appendRow, which refuses it with the reason, as before.
 */
import type { CopyBinaryEncoder } from './copy-binary.ts';
import { STATEMENT_TABLE } from './event-tables.ts';

/** STATEMENT_TABLE's columns as this writer writes them: checked once, at load. */
const WRITTEN_TYPES = [
  'timestamptz', // ts
  'text', // target
  'text', // instance
  'text', // database
  'text', // username
  'text', // application
  'int4', // pid
  'float8', // duration_ms
  'text', // fingerprint
  'text', // query
  'text', // protocol
  'text', // parameters
  'text', // file
  'int8', // file_offset
  'text', // ts_logged
] as const;
if (STATEMENT_TABLE.types.join() !== WRITTEN_TYPES.join()) throw new Error('statement-row.ts is out of step with STATEMENT_TABLE (event-tables.ts)');

/**
 * Appends the row `values` (a statement_events row as event-rows.ts maps it: ts in
 * microseconds as a number), its query column (index 9) taken from the UTF-8 bytes
 * `sql[sqlStart, sqlEnd)` instead (as CopyBinaryEncoder.stageUtf8). Returns the block's length
 * after the row, or -1 with nothing written when a value does not fit its column.
 */
export function appendStatementRow(enc: CopyBinaryEncoder, values: readonly unknown[], sql: Buffer, sqlStart: number, sqlEnd: number): number {
  const start = enc.beginRow();
  const fits =
    enc.timestampMicrosField(values[0]) &&
    enc.textField(values[1]) &&
    enc.textField(values[2]) &&
    enc.textField(values[3]) &&
    enc.textField(values[4]) &&
    enc.textField(values[5]) &&
    enc.int4Field(values[6]) &&
    enc.float8Field(values[7]) &&
    enc.textField(values[8]);
  if (fits) {
    enc.utf8BytesField(sql, sqlStart, sqlEnd);
    if (enc.textField(values[10]) && enc.textField(values[11]) && enc.textField(values[12]) && enc.int8NumberField(values[13]) && enc.textField(values[14])) {
      return enc.blockLength;
    }
  }
  enc.rewindRow(start);
  return -1;
}
