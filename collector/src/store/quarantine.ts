/**
 * A row the store refused, made into a pglog.quarantine record (pure): the reason (table,
 * SQLSTATE or encoder code, message) and the row as JSON, column by column, with long text
 * shortened so that one huge bad entry does not become a huge quarantine row.
 */
import type { MappedRow } from './event-rows.ts';
import { cleanJson } from './event-rows.ts';
import { TABLES } from './event-tables.ts';
import { type Micros, microsToIso } from './iso-time.ts';
import type { QuarantineRecord } from './store-sql.ts';
import { cleanText, noRepairs } from './text-clean.ts';

/** Text values in a quarantined row are kept up to this many bytes each. */
export const QUARANTINE_TEXT_BYTES = 64 * 1024;
const MAX_REASON_CHARS = 2000;

export function quarantineRecord(row: MappedRow, reason: string): QuarantineRecord {
  const def = TABLES[row.table];
  const repairs = noRepairs();
  const out: Record<string, unknown> = { table: row.table, kind: row.kind };
  def.columns.forEach((column, i) => {
    const v = row.values[i];
    if (column === 'payload' && typeof v === 'string') {
      // Kept as an object when it is valid JSON, so it can be queried; as text otherwise.
      try {
        out[column] = cleanJson(JSON.parse(v) as unknown, QUARANTINE_TEXT_BYTES, repairs);
      } catch {
        out[column] = cleanText(v, QUARANTINE_TEXT_BYTES, repairs);
      }
      return;
    }
    out[column] = quarantineValue(column, v);
  });
  const cleanReason = cleanText(`${row.table}: ${reason}`, MAX_REASON_CHARS * 3, repairs);
  return {
    target: cleanText(row.source.target, QUARANTINE_TEXT_BYTES, repairs),
    instance: cleanText(row.source.instance, QUARANTINE_TEXT_BYTES, repairs),
    file: cleanText(row.source.file, QUARANTINE_TEXT_BYTES, repairs),
    fileOffset: Number.isSafeInteger(row.offset) ? row.offset : null,
    reason: cleanReason.length > MAX_REASON_CHARS ? `${cleanReason.slice(0, MAX_REASON_CHARS)}...` : cleanReason,
    row: JSON.stringify(out),
  };
}

function quarantineValue(column: string, v: unknown): unknown {
  if (v === undefined) return null;
  if (typeof v === 'bigint') return column === 'ts' ? safeIso(v) : v.toString();
  // The event time in microseconds (iso-time.ts): as a time, like the bigint form.
  if (typeof v === 'number' && column === 'ts' && Number.isSafeInteger(v)) return safeIso(v);
  if (typeof v === 'number') return Number.isFinite(v) ? v : String(v);
  if (v instanceof Date) return Number.isNaN(v.getTime()) ? 'Invalid Date' : v.toISOString();
  return cleanJson(v, QUARANTINE_TEXT_BYTES, noRepairs());
}

function safeIso(us: Micros): string {
  try {
    return microsToIso(us);
  } catch {
    return `${us.toString()} microseconds since 1970`;
  }
}

/** The encoder's message names the column by number: add its name. */
export function encoderReason(row: MappedRow, message: string): string {
  const columns = TABLES[row.table].columns;
  return message.replace(/^row \d+, column (\d+)/, (_, c: string) => `column ${columns[Number(c)] ?? c}`);
}
