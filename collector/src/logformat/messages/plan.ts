/**
 * auto_explain output after `duration: X ms  plan:\n`, in its four formats:
 *
 *   text: Query Text: SQL (possibly several lines)\n<plan lines>
 *   json: { "Query Text": "SQL", "Plan": { ... } }   (parsed; when truncated, the query is
 *         still extracted from the text)
 *   yaml: Query Text: "SQL" ... (YAML values are JSON-escaped by EXPLAIN)
 *   xml:  <explain ...><Query-Text>SQL</Query-Text>...
 */

export type PlanFormat = 'text' | 'json' | 'yaml' | 'xml';

export interface PlanInfo {
  format: PlanFormat;
  /** The query text, or null when the plan does not carry it. */
  query: string | null;
}

/** A line that starts the plan proper (not a continuation of a multi-line query text). */
function isPlanLine(line: string): boolean {
  return (
    line.includes('(cost=') ||
    line.includes('(actual ') ||
    line.includes('(never executed)') ||
    line.startsWith('Query Parameters: ') ||
    line.startsWith('Query Identifier: ')
  );
}

function textQuery(body: string): string {
  const first = body.indexOf('\n');
  if (first === -1) return body.slice(12);
  let at = first;
  while (at !== -1) {
    const next = body.indexOf('\n', at + 1);
    const line = body.slice(at + 1, next === -1 ? body.length : next);
    if (isPlanLine(line)) return body.slice(12, at);
    at = next;
  }
  // No recognisable plan line (e.g. COSTS off): the query is its first line.
  return body.slice(12, first);
}

/** Reads the JSON string that starts at the quote `at`; unterminated → the rest, unescaped. */
function jsonStringAt(text: string, at: number): string {
  let i = at + 1;
  while (i < text.length) {
    const c = text.charCodeAt(i);
    if (c === 92) i += 2;
    else if (c === 34) break;
    else i++;
  }
  const raw = i < text.length ? text.slice(at, i + 1) : `${text.slice(at, Math.min(i, text.length))}"`;
  try {
    const v: unknown = JSON.parse(raw);
    if (typeof v === 'string') return v;
  } catch {
    // a cut escape sequence: fall through
  }
  return raw.slice(1, -1);
}

function quotedAfter(body: string, key: string): string | null {
  const k = body.indexOf(key);
  if (k === -1) return null;
  const q = k + key.length;
  return body.charCodeAt(q) === 34 ? jsonStringAt(body, q) : null;
}

function unescapeXml(s: string): string {
  return s.replace(/&(lt|gt|amp|quot|apos|#(\d+)|#x([0-9a-fA-F]+));/g, (all, name: string, dec?: string, hex?: string) => {
    switch (name) {
      case 'lt':
        return '<';
      case 'gt':
        return '>';
      case 'amp':
        return '&';
      case 'quot':
        return '"';
      case 'apos':
        return "'";
      default: {
        const code = dec !== undefined ? Number(dec) : Number.parseInt(hex ?? '', 16);
        return Number.isInteger(code) && code >= 0 && code <= 0x10ffff ? String.fromCodePoint(code) : all;
      }
    }
  });
}

export function parsePlan(body: string): PlanInfo {
  const start = body.trimStart();
  if (start.startsWith('{')) {
    try {
      const doc: unknown = JSON.parse(start);
      if (doc !== null && typeof doc === 'object' && !Array.isArray(doc)) {
        const q = (doc as Record<string, unknown>)['Query Text'];
        return { format: 'json', query: typeof q === 'string' ? q : null };
      }
    } catch {
      // truncated (entry cap) or otherwise cut: extract what is there
    }
    return { format: 'json', query: quotedAfter(start, '"Query Text": ') };
  }
  if (start.startsWith('<')) {
    const a = start.indexOf('<Query-Text>');
    if (a === -1) return { format: 'xml', query: null };
    const b = start.indexOf('</Query-Text>', a + 12);
    return { format: 'xml', query: unescapeXml(start.slice(a + 12, b === -1 ? start.length : b)) };
  }
  // YAML values are JSON-quoted; a text-format query never starts with a double quote.
  if (start.startsWith('Query Text: "') || start.startsWith('- Query Text: "')) {
    return { format: 'yaml', query: quotedAfter(start, 'Query Text: ') };
  }
  if (start.startsWith('Query Text: ')) return { format: 'text', query: textQuery(start) };
  return { format: 'text', query: null };
}
