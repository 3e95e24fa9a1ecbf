// A static audit of monitoring SQL (pure, for snapshot-sql-audit.test.ts): the patterns that
// let an object planted in a schema on the search_path take over a statement (security
// review F2). A name resolves through the search_path unless it is qualified, and an
// operator is taken from anywhere on the path when it is an exact match while pg_catalog's
// needs an implicit cast. So the audit reports:
//   - a catalog column that is not int4 (oid, xid, int2, int8 columns) compared with a bare
//     integer literal, which is int4: `pg_locks.database = 0` is oid = int4, which pg_catalog
//     has no operator for (write `0::oid`);
//   - a function called without a schema (SQL syntax such as COALESCE aside);
//   - a relation read without a schema that is not a CTE of the statement.
// String literals and comments are blanked out first, so their text is never taken for SQL.

/** Catalog columns the monitoring SQL reads whose type is not int4, by name. */
const NOT_INT4_COLUMNS = new Map<string, string>([
  ['oid', 'oid'],
  ['database', 'oid'],
  ['relation', 'oid'],
  ['classid', 'oid'],
  ['objid', 'oid'],
  ['datid', 'oid'],
  ['usesysid', 'oid'],
  ['userid', 'oid'],
  ['dbid', 'oid'],
  ['relnamespace', 'oid'],
  ['extnamespace', 'oid'],
  ['transactionid', 'xid'],
  ['tuple', 'int2'],
  ['objsubid', 'int2'],
  ['queryid', 'int8'],
  ['calls', 'int8'],
  ['rows', 'int8'],
]);

/** Words followed by `(` that are SQL syntax, not function calls. */
const SYNTAX = new Set([
  'as',
  'materialized',
  'in',
  'exists',
  'any',
  'all',
  'some',
  'array',
  'row',
  'values',
  'cast',
  'lateral',
  'on',
  'and',
  'or',
  'not',
  'from',
  'join',
  'where',
  'select',
  'over',
  'filter',
  'within',
  'when',
  'then',
  'else',
  'using',
  'coalesce',
  'nullif',
  'greatest',
  'least',
  'extract',
  'with',
  'by',
  'distinct',
]);

export interface AuditFinding {
  rule: 'cross-type comparison' | 'unqualified function' | 'unqualified relation';
  text: string;
}

/** `sql` with the insides of string literals and the comments blanked to spaces (same length). */
export function blankLiterals(sql: string): string {
  let out = '';
  let i = 0;
  while (i < sql.length) {
    const ch = sql[i]!;
    if (ch === "'") {
      let j = i + 1;
      while (j < sql.length && !(sql[j] === "'" && sql[j + 1] !== "'")) j += sql[j] === "'" ? 2 : 1;
      out += `'${' '.repeat(Math.max(0, j - i - 1))}'`;
      i = j + 1;
    } else if (ch === '-' && sql[i + 1] === '-') {
      const end = sql.indexOf('\n', i);
      const j = end === -1 ? sql.length : end;
      out += ' '.repeat(j - i);
      i = j;
    } else {
      out += ch;
      i++;
    }
  }
  return out;
}

const COMPARISON = String.raw`(?:<>|!=|[<>]=?|=)`;

export function auditSql(sql: string): AuditFinding[] {
  const text = blankLiterals(sql);
  const findings: AuditFinding[] = [];
  const columns = [...NOT_INT4_COLUMNS.keys()].join('|');

  // A non-int4 column against a bare integer literal (a cast after it makes it no longer bare).
  const columnFirst = new RegExp(String.raw`\b\w+\.(?:${columns})\s*${COMPARISON}\s*-?\d+\b(?!\s*::|\.)`, 'gi');
  const literalFirst = new RegExp(String.raw`(?<![\w.:])-?\d+\s*${COMPARISON}\s*\w+\.(?:${columns})\b`, 'gi');
  const inList = new RegExp(String.raw`\b\w+\.(?:${columns})\s+(?:NOT\s+)?IN\s*\(\s*-?\d`, 'gi');
  for (const re of [columnFirst, literalFirst, inList]) {
    for (const m of text.matchAll(re)) findings.push({ rule: 'cross-type comparison', text: m[0] });
  }

  // Function calls: a word followed by `(`, not after a `.` (qualified) or `::` (a type modifier).
  for (const m of text.matchAll(/(?<![\w.$:"])([A-Za-z_][\w$]*)\s*\(/g)) {
    const word = m[1]!.toLowerCase();
    if (SYNTAX.has(word)) continue;
    const before = text.slice(0, m.index).trimEnd();
    if (/\bAS$/i.test(before)) continue; // a column alias list: unnest(...) AS b(blocking_pid)
    findings.push({ rule: 'unqualified function', text: m[0] });
  }

  // Relations after FROM / JOIN: qualified, a subquery, LATERAL, or a CTE of the statement.
  const ctes = new Set([...text.matchAll(/(?:\bWITH|,)\s*([a-z_]\w*)\s+AS\s+(?:MATERIALIZED\s+)?\(/gi)].map((m) => m[1]!.toLowerCase()));
  for (const m of text.matchAll(/\b(?:FROM|JOIN)\s+("[^"]*"|[a-z_][\w$]*)(\s*\.)?/gi)) {
    const name = m[1]!.toLowerCase();
    if (m[2] !== undefined || name === 'lateral' || ctes.has(name)) continue;
    findings.push({ rule: 'unqualified relation', text: m[0] });
  }
  return findings;
}
