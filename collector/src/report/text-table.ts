/**
 * Fixed-width text tables for a terminal: a header, a rule, aligned columns. One column may
 * be flexible: it takes the width the others leave, and text longer than its column is cut
 * with "…". Widths count code points (no attempt at East Asian double-width glyphs). Every
 * cell is passed through escapeControls first (terminal-safe.ts): cells hold names and texts
 * from monitored servers, and a control character in one would reach the terminal; widths
 * are those of the escaped text. Pure.
 */
import { escapeControls } from './terminal-safe.ts';

export interface Column {
  header: string;
  align: 'left' | 'right';
  /** Takes the remaining width (at most one column; the last one reads best). */
  flex?: boolean;
  /** Cap for a fixed column's width; longer cells are cut. */
  maxWidth?: number;
}

/** The name columns the reports share: a long target, instance or database name is cut at the same width in each. */
export const TARGET_COLUMN: Readonly<Column> = { header: 'target', align: 'left', maxWidth: 24 };
export const INSTANCE_COLUMN: Readonly<Column> = { header: 'instance', align: 'left', maxWidth: 16 };
export const DATABASE_COLUMN: Readonly<Column> = { header: 'database', align: 'left', maxWidth: 20 };

/** Left-aligned text columns, one per header. */
export function textColumns(...headers: string[]): Column[] {
  return headers.map((header) => ({ header, align: 'left' }));
}

/** Right-aligned columns for counts and durations, one per header. */
export function numberColumns(...headers: string[]): Column[] {
  return headers.map((header) => ({ header, align: 'right' }));
}

/** The flexible column: left-aligned text that takes the width the others leave. */
export function flexColumn(header: string): Column {
  return { header, align: 'left', flex: true };
}

const GAP = '  ';
/** A flexible column never gets narrower than this, even if the table then exceeds the width. */
const MIN_FLEX_WIDTH = 20;

function length(s: string): number {
  let n = 0;
  for (const _ of s) n++;
  return n;
}

/** `s` cut to `width` code points, the last one replaced by "…" when something was cut. */
export function cut(s: string, width: number): string {
  if (width <= 0) return '';
  if (length(s) <= width) return s;
  return `${Array.from(s)
    .slice(0, width - 1)
    .join('')}…`;
}

/**
 * Text on one line: runs of whitespace (newlines, tabs) become one space; the other control
 * characters and bidi overrides become visible escapes (an ESC in a query is shown as `\x1b`).
 */
export function oneLine(s: string): string {
  return escapeControls(s.replace(/\s+/g, ' ').trim());
}

function pad(s: string, width: number, align: 'left' | 'right'): string {
  const fill = ' '.repeat(Math.max(0, width - length(s)));
  return align === 'left' ? s + fill : fill + s;
}

/** Renders rows of cells (already formatted text) into lines no wider than `width` where possible. */
export function renderTable(columns: readonly Column[], rowsIn: readonly (readonly string[])[], width: number): string {
  // Escaped before any width is measured, so the columns line up with what is printed.
  const rows = rowsIn.map((r) => r.map(escapeControls));
  const natural = columns.map((c, i) => {
    const widest = Math.max(length(c.header), ...rows.map((r) => length(r[i] ?? '')));
    return c.maxWidth === undefined ? widest : Math.min(widest, Math.max(c.maxWidth, length(c.header)));
  });
  const flexIndex = columns.findIndex((c) => c.flex === true);
  const widths = [...natural];
  if (flexIndex >= 0) {
    const others = natural.reduce((sum, w, i) => (i === flexIndex ? sum : sum + w), 0) + GAP.length * (columns.length - 1);
    widths[flexIndex] = Math.min(natural[flexIndex] ?? 0, Math.max(MIN_FLEX_WIDTH, width - others));
  }
  const line = (cells: readonly string[]): string =>
    columns
      .map((c, i) => pad(cut(cells[i] ?? '', widths[i] ?? 0), widths[i] ?? 0, c.align))
      .join(GAP)
      .trimEnd();
  const out = [line(columns.map((c) => c.header)), line(widths.map((w) => '─'.repeat(w)))];
  for (const r of rows) out.push(line(r));
  return out.join('\n');
}
