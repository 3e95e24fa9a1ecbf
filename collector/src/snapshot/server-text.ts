/**
 * The query text other databases' sessions put into pg_stat_activity is stored in *their*
 * database's encoding, and PostgreSQL hands it to our session unconverted: a WIN1251
 * database's Cyrillic query arrives as invalid UTF-8. (pg_stat_statements converts its texts
 * itself, so its query column is read as plain text.)
 * The activity SQL therefore reads it as bytes (`textsend`) together with the
 * encoding of the database they came from (`pg_encoding_to_char(pg_database.encoding)`), and
 * this module decodes them with the log decoder's codecs: the same rules as log text (invalid
 * sequences replaced, NUL bytes removed), no configuration needed. Pure.
 *
 * `textsend` returns the bytes unconverted as long as the monitoring session's own database
 * and client encoding are both UTF8 (pglog's client encoding is UTF8; `sql.database` should
 * be a UTF8 database, as `postgres` normally is).
 */
import { Decoder } from '../logformat/decode.ts';
import type { Row } from './pg-values.ts';

/** One Decoder per encoding name; an encoding the log decoder does not know decodes as UTF-8. */
const decoders = new Map<string, Decoder>();

function decoderFor(encoding: string | null): Decoder {
  const name = encoding ?? 'UTF8';
  let d = decoders.get(name);
  if (d === undefined) {
    try {
      d = new Decoder({ defaultEncoding: name, databases: {} });
    } catch {
      d = decoderFor('UTF8');
    }
    decoders.set(name, d);
  }
  return d;
}

/** Decodes `bytes` written in `encoding` (a PostgreSQL encoding name; null: UTF8). */
export function decodeServerText(bytes: Buffer | null, encoding: string | null): string | null {
  return bytes === null ? null : decoderFor(encoding).decode(bytes, null);
}

/** The text of a `<column>_bytes` bytea column in the encoding of `<column>_encoding`; null when NULL. */
export function serverTextOf(row: Row, column: string): string | null {
  const bytes = row[`${column}_bytes`];
  const encoding = row[`${column}_encoding`];
  if (bytes === null || bytes === undefined) return null;
  if (!Buffer.isBuffer(bytes)) throw new Error(`snapshot: column ${column}_bytes: expected bytea, got ${typeof bytes}`);
  return decodeServerText(bytes, typeof encoding === 'string' ? encoding : null);
}
