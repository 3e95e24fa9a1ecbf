// The sqlstate_class label of pglog_log_errors_total: a known class, `other` for any other
// text (a hostile log cannot grow the label set), `unknown` when none was logged; and the
// stream's tally, which counts ERROR/FATAL/PANIC error and deadlock events by that class.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import fc from 'fast-check';

import { tallyEvents } from '../../../src/collect/instance-stream.ts';
import type { PglogEvent } from '../../../src/logformat/events.ts';
import { isErrorSeverity, SQLSTATE_CLASSES, sqlstateClassOf } from '../../../src/observability/sqlstate-class.ts';

test('known SQLSTATEs give their class; anything else other; none unknown', () => {
  // A known SQLSTATE's class is its first two characters.
  for (const known of ['40P01', '42P01', '23505', '57P01', 'XX000', '0A000', 'HV00N']) assert.equal(sqlstateClassOf(known), known.slice(0, 2), known);
  assert.equal(sqlstateClassOf(null), 'unknown');
  assert.equal(sqlstateClassOf(''), 'unknown');
  for (const hostile of ['ZZ000', '4', '42P01 ', '42p01', '42P011', '"}\n', 'é2P01', '99999']) {
    assert.equal(sqlstateClassOf(hostile), 'other', hostile);
  }
  assert.equal(new Set(SQLSTATE_CLASSES).size, SQLSTATE_CLASSES.length);
});

test('the label set stays bounded whatever the log holds', () => {
  const allowed = new Set<string>([...SQLSTATE_CLASSES, 'other', 'unknown']);
  fc.assert(
    fc.property(fc.option(fc.string({ maxLength: 12 })), (s) => allowed.has(sqlstateClassOf(s))),
    { numRuns: 2000 },
  );
});

test('severities counted as errors: ERROR, FATAL, PANIC, not WARNING', () => {
  assert.deepEqual(['LOG', 'WARNING', 'ERROR', 'FATAL', 'PANIC', 'NOTICE'].filter(isErrorSeverity), ['ERROR', 'FATAL', 'PANIC']);
});

test('tallyEvents: kinds, and ERROR/FATAL/PANIC error and deadlock events by class', () => {
  const ev = (kind: string, severity: string, sqlstate: string | null): PglogEvent => ({ kind, severity, sqlstate }) as unknown as PglogEvent;
  const tally = tallyEvents([
    ev('statement', 'LOG', '00000'),
    ev('error', 'ERROR', '42P01'),
    ev('error', 'ERROR', '42703'),
    ev('error', 'FATAL', '28P01'),
    ev('error', 'WARNING', '01000'),
    ev('deadlock', 'ERROR', '40P01'),
    ev('error', 'ERROR', null),
    ev('error', 'PANIC', 'garbage'),
  ]);
  assert.deepEqual(Object.fromEntries(tally.kinds), { statement: 1, error: 6, deadlock: 1 });
  assert.deepEqual(Object.fromEntries(tally.errorClasses), { 42: 2, 28: 1, 40: 1, unknown: 1, other: 1 });
});
