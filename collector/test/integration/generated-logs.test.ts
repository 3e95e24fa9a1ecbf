// The parser against real PostgreSQL 15 logs (scripts/loggen): two log_line_prefix settings,
// each written as stderr, csvlog and jsonlog at once, with counts the generator took
// independently of the logs (pg_stat_statements and what the load itself did).
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, test } from 'node:test';

import fc from 'fast-check';

import type { PglogEvent, PlanEvent, StatementEvent } from '../../src/logformat/events.ts';
import type { LogFormat } from '../../src/logformat/record.ts';
import { FORMATS, generatedLogs, logPath, type RunManifest } from '../helpers/generated-logs.ts';
import { parseChunks, parseInChunksOf, type ParseSetup } from '../helpers/parse.ts';

const logs = generatedLogs();

function setupFor(run: RunManifest, format: LogFormat): ParseSetup {
  return {
    format,
    prefix: format === 'stderr' ? run.log_line_prefix : undefined,
    encodings: { defaultEncoding: 'UTF8', databases: run.databases },
  };
}

function countBy<T>(items: T[], key: (t: T) => string | null): Record<string, number> {
  const out: Record<string, number> = {};
  for (const item of items) {
    const k = key(item);
    if (k !== null) out[k] = (out[k] ?? 0) + 1;
  }
  return out;
}

/**
 * What every format must agree on for one event (fields all three formats carry). `%t` is
 * not comparable: elog.c formats it from a second time(NULL) call, so it can be a second
 * later than the csvlog/jsonlog time of the same entry (seen in these logs).
 */
function essence(e: PglogEvent, secondsOnly: boolean): unknown {
  const ts = secondsOnly ? null : e.ts;
  const common = { kind: e.kind, pid: e.pid, ts, database: e.database, user: e.user, severity: e.severity };
  if (e.kind === 'statement') return { ...common, d: e.duration_ms, q: e.query, f: e.fingerprint, p: e.parameters, n: e.statement_name };
  if (e.kind === 'plan') return { ...common, d: e.duration_ms, q: e.query, f: e.fingerprint, format: e.format, plan: e.plan };
  if (e.kind === 'error') return { ...common, m: e.message, d: e.detail, h: e.hint, c: e.context, s: e.statement, pos: e.cursor_position };
  if (e.kind === 'lock_wait') return { ...common, s: e.state, m: e.lock_mode, o: e.lock_object, w: e.wait_ms, h: e.holder_pids };
  if (e.kind === 'deadlock') return { ...common, p: e.processes };
  if (e.kind === 'autovacuum' || e.kind === 'autoanalyze') return { ...common, t: e.table, el: e.elapsed_s };
  if (e.kind === 'other') return { ...common, m: e.message, sub: e.subtype, d: e.duration_ms };
  return common;
}

/** Element by element: a deepEqual diff of two 60,000-event arrays would take minutes. */
function assertSameEvents(a: unknown[], b: unknown[], what: string): void {
  for (let i = 0; i < Math.min(a.length, b.length); i++) assert.deepEqual(a[i], b[i], `${what}: event ${i} differs`);
  assert.equal(a.length, b.length, `${what}: event counts`);
}

for (const name of ['A', 'B'] as const) {
  const run = logs.runs[name];
  describe(`generated log ${name} (${run.log_line_prefix.trim()})`, () => {
    const parsed = Object.fromEntries(
      FORMATS.map((format) => {
        const bytes = readFileSync(logPath(logs, run, format));
        return [format, { bytes, ...parseInChunksOf(setupFor(run, format), bytes, 64 * 1024) }];
      }),
    ) as Record<(typeof FORMATS)[number], { bytes: Buffer; events: PglogEvent[]; counters: ReturnType<typeof parseChunks>['counters'] }>;

    for (const format of FORMATS) {
      describe(format, () => {
        const { events, counters } = parsed[format];
        const statements = events.filter((e): e is StatementEvent => e.kind === 'statement');

        test('statement events equal the executions pg_stat_statements counted, per database', () => {
          assert.equal(statements.length, run.statements.total);
          assert.equal(statements.length, run.statements.load_known_total);
          assert.deepEqual(
            countBy(statements, (s) => s.database),
            run.statements.by_database,
          );
          assert.ok(statements.every((s) => s.duration_ms !== null && s.duration_ms >= 0));
          assert.ok(
            statements.some((s) => s.protocol === 'extended' && s.parameters !== null),
            'extended protocol with parameters',
          );
          assert.ok(statements.some((s) => s.protocol === 'simple'));
        });

        test('nothing malformed, truncated, replaced or lost', () => {
          assert.equal(counters.malformed, 0);
          assert.equal(counters.truncated, 0);
          assert.equal(counters.replacements, 0, 'every database decoded with its declared encoding');
          assert.equal(counters.entries, events.length);
          assert.equal(counters.bytes, parsed[format].bytes.length);
          assert.equal(events.at(-1)!.end, counters.bytes, 'events tile the file to its end');
          for (let i = 1; i < events.length; i++) assert.equal(events[i]!.offset, events[i - 1]!.end);
        });

        test('errors by severity and SQLSTATE match what the load triggered', () => {
          const errors = events.filter((e) => e.kind === 'error' || e.kind === 'deadlock');
          const severities = countBy(errors, (e) => e.severity);
          const expected = (sev: 'ERROR' | 'FATAL'): number => Object.values(run.errors[sev]).reduce((a, b) => a + b, 0);
          assert.equal(severities.ERROR, expected('ERROR'));
          assert.equal(severities.FATAL, expected('FATAL'));
          if (format !== 'stderr' || run.log_line_prefix.includes('%e')) {
            assert.deepEqual(
              countBy(
                errors.filter((e) => e.severity === 'ERROR'),
                (e) => e.sqlstate,
              ),
              run.errors.ERROR,
            );
            assert.deepEqual(
              countBy(
                errors.filter((e) => e.severity === 'FATAL'),
                (e) => e.sqlstate,
              ),
              run.errors.FATAL,
            );
          }
          const withStatement = events.filter((e) => e.kind === 'error' && e.severity === 'ERROR' && e.statement !== null);
          assert.ok(withStatement.length >= expected('ERROR') - 2, 'client errors carry their STATEMENT');
          assert.ok(
            events.some((e) => e.kind === 'error' && e.hint !== null && e.detail !== null),
            'DETAIL and HINT attached',
          );
        });

        test('deadlock, lock waits, temp files, checkpoints, maintenance and connections', () => {
          const deadlocks = events.filter((e) => e.kind === 'deadlock');
          assert.equal(deadlocks.length, run.deadlocks);
          for (const d of deadlocks) {
            assert.ok(d.processes.length >= 2);
            assert.ok(d.processes.every((p) => p.pid > 0 && p.query !== null && p.blocked_by !== null));
          }
          const waits = countBy(
            events.filter((e) => e.kind === 'lock_wait'),
            (e) => e.state,
          );
          assert.equal(waits.waiting, run.lock_waits.still_waiting);
          assert.equal(waits.acquired, run.lock_waits.acquired);
          for (const w of events.filter((e) => e.kind === 'lock_wait')) {
            assert.ok(w.wait_ms > 0 && w.lock_mode.endsWith('Lock') && w.lock_type.length > 0);
          }
          const temp = events.filter((e) => e.kind === 'temp_file');
          assert.equal(temp.length, run.temp_files);
          assert.ok(temp.every((t) => t.size_bytes > 0 && t.statement !== null));
          const checkpoints = events.filter((e) => e.kind === 'checkpoint' && e.phase === 'complete');
          assert.equal(checkpoints.length, run.checkpoints.total_in_log);
          assert.ok(checkpoints.every((c) => c.kind === 'checkpoint' && c.total_s !== null && c.buffers_written !== null));
          for (const table of run.autovacuum.tables_awaited) {
            assert.ok(
              events.some((e) => e.kind === 'autovacuum' && e.table.endsWith(table)),
              `autovacuum of ${table}`,
            );
            assert.ok(
              events.some((e) => e.kind === 'autoanalyze' && e.table.endsWith(table)),
              `autoanalyze of ${table}`,
            );
          }
          const connections = countBy(
            events.filter((e) => e.kind === 'connection'),
            (e) => e.phase,
          );
          assert.equal(connections.received, run.connections.received);
          assert.equal(connections.authorized, run.connections.authorized);
          const disconnections = events.filter((e) => e.kind === 'disconnection');
          assert.equal(disconnections.length, run.connections.disconnections);
          assert.ok(disconnections.every((d) => d.session_ms >= 0));
        });

        test('plans in text and json format, each attached to the statement that follows it', () => {
          const plans = events.filter((e): e is PlanEvent => e.kind === 'plan');
          assert.deepEqual(
            countBy(plans, (p) => p.format),
            { text: run.auto_explain_plans.text, json: run.auto_explain_plans.json },
          );
          for (const plan of plans) {
            const at = events.indexOf(plan);
            const next = events.slice(at + 1).find((e) => e.pid === plan.pid && (e.kind === 'statement' || e.kind === 'error'));
            assert.ok(next !== undefined && next.kind === 'statement', `plan at ${plan.offset} has its statement`);
            assert.equal(next.fingerprint, plan.fingerprint, `plan at ${plan.offset}: same template as its statement`);
            assert.ok(next.duration_ms! >= plan.duration_ms, 'the statement lasts at least as long as its execution');
            if (plan.format === 'json') assert.doesNotThrow(() => JSON.parse(plan.plan));
          }
        });

        test('Cyrillic text from WIN1251 and KOI8R databases comes out as the exact UTF-8 strings', () => {
          for (const [db, expected] of Object.entries(run.cyrillic)) {
            const texts = events
              .filter((e) => e.database === db)
              .map((e) => JSON.stringify(e))
              .join('\n');
            const decoded = (s: string): string => JSON.stringify(s).slice(1, -1);
            for (const s of [...expected.identifiers, ...expected.literals, ...expected.messages, ...expected.pgbench_parameters]) {
              assert.ok(texts.includes(decoded(s)), `${db} (${expected.encoding}): "${s}" not found`);
            }
          }
          assert.ok(Object.values(run.databases).includes('WIN1251') && Object.values(run.databases).includes('KOI8R'));
        });
      });
    }

    test('stderr, csvlog and jsonlog give the same entries and the same events', () => {
      // The logging collector writes each destination as its messages arrive, so entries of
      // different processes interleave differently per file; each process's own sequence is
      // the same.
      const secondsOnly = !/%[mn]/.test(run.log_line_prefix);
      const byPid = (events: PglogEvent[]): unknown[] => {
        const groups = new Map<number | null, unknown[]>();
        for (const e of events) {
          const group = groups.get(e.pid) ?? [];
          group.push(essence(e, secondsOnly));
          groups.set(e.pid, group);
        }
        return [...groups.entries()].sort(([a], [b]) => (a ?? -1) - (b ?? -1)).flatMap(([, g]) => g);
      };
      const [stderr, csv, json] = FORMATS.map((f) => byPid(parsed[f].events));
      assert.equal(parsed.stderr.counters.entries, parsed.csvlog.counters.entries);
      assert.equal(parsed.csvlog.counters.entries, parsed.jsonlog.counters.entries);
      assertSameEvents(stderr!, csv!, 'stderr vs csvlog');
      assertSameEvents(csv!, json!, 'csvlog vs jsonlog');
    });

    test('chunked at random points, the real log yields identical events', () => {
      const { bytes, events } = parsed.csvlog;
      const slice = bytes.subarray(0, events.find((e) => e.end > 256 * 1024)!.end);
      const setup = setupFor(run, 'csvlog');
      const reference = parseChunks(setup, slice).events;
      fc.assert(
        fc.property(fc.uniqueArray(fc.integer({ min: 1, max: slice.length - 1 }), { maxLength: 200 }), (cuts) => {
          assertSameEvents(
            parseChunks(
              setup,
              slice,
              cuts.sort((a, b) => a - b),
            ).events,
            reference,
            `cuts ${cuts.join(',')}`,
          );
        }),
        { numRuns: 20 },
      );
    });

    test('resuming at entry boundaries yields exactly the rest of the events', () => {
      for (const format of FORMATS) {
        const { bytes, events } = parsed[format];
        const setup = setupFor(run, format);
        fc.assert(
          fc.property(fc.integer({ min: 0, max: events.length - 2 }), (i) => {
            const at = events[i]!.end;
            const rest = parseChunks(setup, bytes.subarray(at, Math.min(bytes.length, at + 512 * 1024)), [], at).events;
            const expected = events.slice(i + 1).filter((e) => e.end <= at + 512 * 1024);
            assertSameEvents(rest.slice(0, expected.length), expected, `${format} resumed at ${at}`);
          }),
          { numRuns: 15 },
        );
      }
    });
  });
}
