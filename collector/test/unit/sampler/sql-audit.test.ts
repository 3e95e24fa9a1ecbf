// Every SQL text the collector runs on a monitored server, audited statically for what would
// let an object planted on the search_path take a statement over (security review F2): no
// non-int4 catalog column against a bare integer literal (`pg_locks.database = 0` is
// oid = int4, which pg_catalog has no operator for), no unqualified function, no relation
// that is neither qualified nor a CTE. For each server version branch and pg_stat_statements
// version. That the texts resolve only to pg_catalog on a real server with hostile schemas is
// snapshot-hostile-schema.test.ts.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { SESSION_OPTIONS } from '../../../src/sampler/sql-session.ts';
import { everyMonitoringSql, infoFor } from '../../helpers/monitoring-sql.ts';
import { auditSql, blankLiterals } from '../../helpers/sql-audit.ts';

const VERSIONS = [100000, 110022, 120017, 130000, 140000, 150004, 160000, 170002];
const EXTENSION_VERSIONS = [null, '1.7', '1.8', '1.9', '1.10', '1.11'];

void describe('monitoring SQL: static audit', () => {
  test("no cross-type comparison with a literal, no unqualified function or relation, in any version's text", () => {
    let audited = 0;
    for (const v of VERSIONS) {
      for (const ext of EXTENSION_VERSIONS) {
        for (const { name, sql } of everyMonitoringSql(infoFor(v, ext, 'my ext'))) {
          assert.deepEqual(auditSql(sql), [], `${name} (server ${v}, pg_stat_statements ${ext ?? 'none'}):\n${sql}`);
          audited++;
        }
      }
    }
    assert.ok(audited > 100, `${audited} texts audited`);
  });

  test("the audit finds what it looks for (the review's `wl.database = 0` among them)", () => {
    const rules = (sql: string): string[] => auditSql(sql).map((f) => `${f.rule}: ${f.text}`);
    assert.deepEqual(rules('SELECT 1 FROM pg_catalog.pg_locks wl WHERE (wl.database = 0 OR wl.database = 5)'), [
      'cross-type comparison: wl.database = 0',
      'cross-type comparison: wl.database = 5',
    ]);
    assert.deepEqual(rules('SELECT 1 FROM pg_catalog.pg_locks l WHERE 0 <> l.relation AND l.objsubid IN (1, 2) AND l.transactionid=7'), [
      'cross-type comparison: l.transactionid=7',
      'cross-type comparison: 0 <> l.relation',
      'cross-type comparison: l.objsubid IN (1',
    ]);
    assert.deepEqual(rules("SELECT 1 FROM pg_catalog.pg_locks l WHERE l.database = 0::oid AND l.relation = '1' AND l.pid = 0"), []);
    assert.deepEqual(rules('SELECT unnest(a.x), pg_catalog.cardinality(a.x), COALESCE(a.y, 0) FROM a'), [
      'unqualified function: unnest(',
      'unqualified relation: FROM a',
    ]);
    assert.deepEqual(
      rules(
        'WITH a AS MATERIALIZED (SELECT 1 FROM pg_stat_activity) SELECT * FROM a CROSS JOIN LATERAL pg_catalog.unnest(a.b) AS b(c) JOIN pg_locks l ON true',
      ),
      ['unqualified relation: FROM pg_stat_activity', 'unqualified relation: JOIN pg_locks'],
    );
    // Literals and comments are not SQL.
    assert.deepEqual(rules("SELECT 'FROM x WHERE a.oid = 0 unnest(' AS t -- FROM y\nFROM pg_catalog.pg_class c"), []);
    assert.equal(blankLiterals("a 'it''s' b -- c\nd"), "a '     ' b     \nd");
  });

  test('every session pins search_path to pg_catalog then pg_temp, read-only', () => {
    assert.match(SESSION_OPTIONS, /(?:^| )-c search_path=pg_catalog,pg_temp(?: |$)/);
    assert.match(SESSION_OPTIONS, /(?:^| )-c default_transaction_read_only=on(?: |$)/);
  });
});
