// Every function the store migrations create resolves names the same on any caller's
// search_path (security review R1; docs/store.md "Store roles and search_path"): as the
// migrations leave it, it has `SET search_path` (in its CREATE, or in an ALTER FUNCTION after
// its newest CREATE OR REPLACE, which would drop it), or it is a LANGUAGE sql function whose
// body qualifies every function, operator and type (so the planner may still inline it). A
// static check over the migration files, so that a new function cannot forget it.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { DEFAULT_MIGRATIONS_DIR, type MigrationFile, readMigrations } from '../../../src/store/migrate.ts';

interface FunctionState {
  file: string;
  language: string;
  pinned: boolean;
  body: string;
}

/** The statements of a migration, without `--` comments, split at `;` outside quotes and dollar quotes. */
function statementsOf(sql: string): string[] {
  const out: string[] = [];
  let current = '';
  let i = 0;
  while (i < sql.length) {
    const rest = sql.slice(i);
    const dollar = /^\$[A-Za-z_]*\$/.exec(rest);
    if (dollar !== null) {
      const end = sql.indexOf(dollar[0], i + dollar[0].length);
      const stop = end < 0 ? sql.length : end + dollar[0].length;
      current += sql.slice(i, stop);
      i = stop;
    } else if (rest.startsWith("'")) {
      const m = /^'(?:[^']|'')*'/.exec(rest);
      const text = m?.[0] ?? rest;
      current += text;
      i += text.length;
    } else if (rest.startsWith('--')) {
      const end = sql.indexOf('\n', i);
      i = end < 0 ? sql.length : end;
    } else if (rest.startsWith(';')) {
      if (current.trim() !== '') out.push(current.trim());
      current = '';
      i++;
    } else {
      current += sql[i];
      i++;
    }
  }
  if (current.trim() !== '') out.push(current.trim());
  return out;
}

const TYPE_NAMES: Record<string, string> = { int: 'int4', integer: 'int4', bigint: 'int8', smallint: 'int2', 'double precision': 'float8', real: 'float4' };

/** `pglog.f(a date, b int)` -> `pglog.f(date,int4)`: argument types only, in the catalog's names. */
function signature(name: string, args: string): string {
  const types = args
    .split(',')
    .map((a) => a.trim().toLowerCase())
    .filter((a) => a !== '')
    .map((a) => {
      const words = a.replace(/^(?:in|out|inout|variadic)\s+/, '').split(/\s+/);
      const type = words.length > 1 && !(words.join(' ') in TYPE_NAMES) ? words.slice(1).join(' ') : words.join(' ');
      return TYPE_NAMES[type] ?? type.replace(/^pg_catalog\./, '');
    });
  return `${name.toLowerCase()}(${types.join(',')})`;
}

/** Each function's state once all of `files` are applied, in order. */
function functionStates(files: readonly MigrationFile[]): Map<string, FunctionState> {
  const states = new Map<string, FunctionState>();
  for (const f of files) {
    for (const s of statementsOf(f.sql)) {
      const created = /^CREATE\s+(?:OR\s+REPLACE\s+)?FUNCTION\s+([\w.]+)\s*\(([^)]*)\)/i.exec(s);
      if (created !== null) {
        const body = /\$([A-Za-z_]*)\$([\s\S]*)\$\1\$/.exec(s)?.[2] ?? '';
        const options = s.replace(/\$([A-Za-z_]*)\$[\s\S]*\$\1\$/, '');
        states.set(signature(created[1] ?? '', created[2] ?? ''), {
          file: f.file,
          language: (/\bLANGUAGE\s+(\w+)/i.exec(options)?.[1] ?? '').toLowerCase(),
          // A CREATE OR REPLACE replaces the function's settings with its own.
          pinned: /\bSET\s+search_path\b/i.test(options),
          body,
        });
        continue;
      }
      const altered = /^ALTER\s+FUNCTION\s+([\w.]+)\s*\(([^)]*)\)([\s\S]*)$/i.exec(s);
      if (altered !== null) {
        const key = signature(altered[1] ?? '', altered[2] ?? '');
        const state = states.get(key);
        assert.ok(state !== undefined, `${f.file}: ALTER FUNCTION ${key} names no function the migrations created`);
        if (/\bSET\s+search_path\b/i.test(altered[3] ?? '')) state.pinned = true;
        if (/\bRESET\s+(?:search_path|ALL)\b/i.test(altered[3] ?? '')) state.pinned = false;
      }
    }
  }
  return states;
}

/** SQL constructs that look like calls but name no function: never looked up on the path. */
const CONSTRUCTS = new Set(['select', 'values', 'case', 'when', 'then', 'else', 'end', 'and', 'or', 'not', 'in', 'least', 'greatest', 'coalesce', 'nullif']);

/** What in a SQL function's body would be looked up on the caller's path; empty when nothing is. */
function unqualifiedNames(body: string): string[] {
  const text = body
    .replace(/'(?:[^']|'')*'/g, "''")
    .replace(/--[^\n]*/g, '')
    .replace(/OPERATOR\s*\(\s*pg_catalog\.[^)\s]+\s*\)/gi, ' ');
  const found: string[] = [];
  for (const m of text.matchAll(/[+\-*/<>=~!@#%^&|`?]+/g)) found.push(`operator ${m[0]}`);
  for (const m of text.matchAll(/(?<![\w.])([A-Za-z_][\w$]*(?:\.[A-Za-z_][\w$]*)?)\s*\(/g)) {
    const name = m[1] ?? '';
    if (!/^(?:pg_catalog|pglog)\./i.test(name) && !CONSTRUCTS.has(name.toLowerCase())) found.push(`function ${name}`);
  }
  for (const m of text.matchAll(/::\s*([A-Za-z_][\w$]*(?:\.[A-Za-z_][\w$]*)?)/g)) {
    if (!/^pg_catalog\./i.test(m[1] ?? '')) found.push(`type ${m[1]}`);
  }
  return found;
}

/** The functions that would resolve a name on their caller's path, with why. */
function unsafe(states: Map<string, FunctionState>): string[] {
  const out: string[] = [];
  for (const [name, s] of states) {
    if (s.pinned) continue;
    if (s.language !== 'sql') {
      out.push(`${name} (${s.file}, LANGUAGE ${s.language}): needs SET search_path = pg_catalog, pg_temp`);
      continue;
    }
    const names = unqualifiedNames(s.body);
    if (names.length > 0) out.push(`${name} (${s.file}): SET search_path, or qualify ${names.join(', ')}`);
  }
  return out;
}

test('every function of the store migrations has SET search_path or a body that names only qualified objects', async () => {
  const files = await readMigrations(DEFAULT_MIGRATIONS_DIR);
  const states = functionStates(files);
  // The parser found the functions there are (a check that finds nothing passes nothing).
  for (const f of [
    'pglog.ensure_partitions(date,int4)',
    'pglog.drop_partitions_before(date)',
    'pglog.partitioned_tables()',
    'pglog.duration_bin(float8)',
    'pglog.duration_of_bin(int4)',
  ]) {
    assert.ok(states.has(f), `${f} found in the migrations: ${[...states.keys()].join(', ')}`);
  }
  assert.deepEqual(unsafe(states), []);
  // The plpgsql functions are pinned; the histogram's SQL functions stay unpinned (inlinable).
  assert.equal(states.get('pglog.ensure_partitions(date,int4)')?.pinned, true);
  assert.equal(states.get('pglog.duration_bin(float8)')?.pinned, false);
});

test("the check finds what version 7 fixed: version 6's store, and a later CREATE OR REPLACE dropping a path", async () => {
  const files = await readMigrations(DEFAULT_MIGRATIONS_DIR);
  const before = unsafe(functionStates(files.filter((f) => f.version <= 6))).map((s) => s.split(' ')[0]);
  assert.deepEqual(before.sort(), [
    'pglog.drop_partitions_before(date)',
    'pglog.duration_bin(float8)',
    'pglog.duration_of_bin(int4)',
    'pglog.ensure_partitions(date,int4)',
  ]);
  const replaced: MigrationFile = {
    version: files.length + 1,
    name: 'later',
    file: '9999_later.sql',
    checksum: '',
    sql: `CREATE OR REPLACE FUNCTION pglog.ensure_partitions(from_day date, days int) RETURNS SETOF text
          LANGUAGE plpgsql AS $$ BEGIN RETURN; END $$;`,
  };
  assert.deepEqual(
    unsafe(functionStates([...files, replaced])).map((s) => s.split(' ')[0]),
    ['pglog.ensure_partitions(date,int4)'],
  );
});

test('unqualifiedNames: what a SQL body would look up on the caller path', () => {
  assert.deepEqual(unqualifiedNames('SELECT CASE WHEN ms <= 0.001 THEN 0 ELSE ln(ms) END'), ['operator <=', 'function ln']);
  assert.deepEqual(unqualifiedNames('SELECT x::float8 OPERATOR(pg_catalog.+) pg_catalog.ln(2::pg_catalog.float8)'), ['type float8']);
  assert.deepEqual(unqualifiedNames("SELECT LEAST(1::pg_catalog.int4, pglog.f('a<=b'))"), []);
});
