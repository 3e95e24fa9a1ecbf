/**
 * Safe HTML pieces for the report: escaping, JSON that can sit inside a <script> element,
 * tables that say how they are sorted, times the page re-renders in the reader's zone. Pure.
 *
 * Everything that comes from the store is hostile: query texts, messages, names and
 * application names are bytes any database role can write into a log. It reaches the page
 * only through `esc` (markup) or `jsonForScript` (data), never by concatenation into script.
 */
import { formatCount, formatMs } from '../format.ts';

const ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

/** Text (or an attribute's value) for HTML: the five significant characters escaped. */
export function esc(s: string | number | null | undefined): string {
  if (s === null || s === undefined) return '';
  return String(s).replace(/[&<>"']/g, (c) => ESCAPES[c] ?? c);
}

/**
 * JSON for `<script type="application/json">`: `<`, `>` and `&` as \u escapes, so no text
 * can close the element (`</script>`) or open a comment; U+2028/2029 too, for old parsers.
 */
export function jsonForScript(value: unknown): string {
  return JSON.stringify(value)
    .replace(/</g, '\\u003c')
    .replace(/>/g, '\\u003e')
    .replace(/&/g, '\\u0026')
    .replace(/\u2028/g, '\\u2028')
    .replace(/\u2029/g, '\\u2029');
}

export const NONE_HTML = '<span class="none">-</span>';

/** A value or the dash of a missing one, escaped. */
export function orNone(s: string | null | undefined): string {
  return s === null || s === undefined || s === '' ? NONE_HTML : esc(s);
}

/** An instant the page shows in the reader's zone or in UTC (client.js fills the text). */
export function timeCell(msEpoch: number | null): string {
  if (msEpoch === null) return NONE_HTML;
  return `<time data-t="${msEpoch}">${esc(new Date(msEpoch).toISOString().slice(0, 19).replace('T', ' '))}Z</time>`;
}

export function bytes(n: number | null): string {
  if (n === null || !Number.isFinite(n)) return '-';
  const units = ['B', 'kB', 'MB', 'GB', 'TB'];
  let v = n;
  let u = 0;
  while (v >= 1024 && u < units.length - 1) {
    v /= 1024;
    u++;
  }
  return `${u === 0 ? String(v) : v.toFixed(v < 10 ? 2 : 1)} ${units[u]}`;
}

export const ms = (v: number | null): string => esc(formatMs(v));
export const count = (v: number): string => esc(formatCount(v));

export interface Column<T> {
  title: string;
  /** The cell's markup (already escaped) and, for sortable numbers, its value. */
  cell: (row: T) => string;
  value?: (row: T) => number | null;
  cls?: 'num' | 'text' | 'code';
}

/**
 * A table whose order is stated: `data-sorted="INDEX desc"` names the column it is sorted by
 * (the browser test checks it), and each numeric cell carries its value in `data-v`.
 */
export function table<T>(
  id: string,
  columns: ReadonlyArray<Column<T>>,
  rows: readonly T[],
  sorted: { column: number; dir: 'desc' | 'asc' } | null,
  rowAttrs?: (row: T) => string,
): string {
  if (rows.length === 0) return `<p class="empty" id="${esc(id)}">none in this window</p>`;
  const head = columns.map((c) => `<th class="${c.cls ?? 'text'}">${esc(c.title)}</th>`).join('');
  const body = rows
    .map((r) => {
      const cells = columns
        .map((c) => {
          const v = c.value?.(r);
          const data = v === undefined || v === null ? '' : ` data-v="${esc(String(v))}"`;
          return `<td class="${c.cls ?? 'text'}"${data}>${c.cell(r)}</td>`;
        })
        .join('');
      return `<tr${rowAttrs === undefined ? '' : ` ${rowAttrs(r)}`}>${cells}</tr>`;
    })
    .join('\n');
  const sortedAttr = sorted === null ? '' : ` data-sorted="${sorted.column} ${sorted.dir}"`;
  return `<table id="${esc(id)}"${sortedAttr}><thead><tr>${head}</tr></thead><tbody>\n${body}\n</tbody></table>`;
}

/** "(20 of 153)" after a section title, or nothing when all are shown. */
export function shownOf(shown: number, groups: number): string {
  return groups > shown ? ` <span class="of">(${count(shown)} of ${count(groups)})</span>` : '';
}

/** A chart placeholder client.js fills; `empty` when the series has no point. */
export function chart(name: string, title: string, hasData: boolean): string {
  if (!hasData) return `<figure class="chart-box"><figcaption>${esc(title)}</figcaption><p class="empty">no data in this window</p></figure>`;
  return `<figure class="chart-box"><figcaption>${esc(title)}</figcaption><div class="chart" data-chart="${esc(name)}"></div></figure>`;
}

/** True when any value of the arrays is a number other than 0. */
export function anyPoint(...series: ReadonlyArray<ReadonlyArray<number | null>>): boolean {
  return series.some((s) => s.some((v) => v !== null && v !== 0));
}
