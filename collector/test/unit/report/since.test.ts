// --since/--until: durations before now and ISO timestamps (UTC without an offset).
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { isPglogError } from '@pglog/common/errors.ts';
import fc from 'fast-check';

import { parseDuration, parseTimeBound, parseTimestamp, resolveWindow } from '../../../src/report/since.ts';

const usage =
  (re: RegExp) =>
  (e: unknown): boolean =>
    isPglogError(e) && e.code === 'USAGE' && re.test(e.message);

test('durations in every unit and combined', () => {
  const durations: Array<[string, number]> = [
    ['30s', 30_000],
    ['15m', 900_000],
    ['1h', 3_600_000],
    ['2d', 172_800_000],
    ['1w', 604_800_000],
    ['250ms', 250],
    ['1h30m', 5_400_000],
    ['1.5h', 5_400_000],
  ];
  for (const [text, ms] of durations) assert.equal(parseDuration(text), ms, text);
  for (const bad of ['', '1', 'h', '1x', '-1h', '1h ', ' 1h', '1H', '1 h', 'PT1H']) assert.equal(parseDuration(bad), null, bad);
});

test('timestamps: date only, minutes, seconds, fractions, Z and offsets; UTC when no offset', () => {
  const iso = (s: string): string | undefined => parseTimestamp(s)?.toISOString();
  assert.equal(iso('2024-05-01'), '2024-05-01T00:00:00.000Z');
  assert.equal(iso('2024-05-01T10:00'), '2024-05-01T10:00:00.000Z');
  assert.equal(iso('2024-05-01 10:00:05'), '2024-05-01T10:00:05.000Z');
  assert.equal(iso('2024-05-01T10:00:05.123456Z'), '2024-05-01T10:00:05.123Z');
  assert.equal(iso('2024-05-01 10:00:00+02'), '2024-05-01T08:00:00.000Z');
  assert.equal(iso('2024-05-01T10:00:00-05:30'), '2024-05-01T15:30:00.000Z');
  assert.equal(iso('2024-05-01T10:00:00+0100'), '2024-05-01T09:00:00.000Z');
  assert.equal(iso('2024-02-29'), '2024-02-29T00:00:00.000Z');
  for (const bad of ['2024-02-30', '2023-02-29', '2024-13-01', '2024-05-01T24:00', '2024-05-01T10:60', '2024-5-1', 'yesterday', '2024-05-01T10']) {
    assert.equal(parseTimestamp(bad), null, bad);
  }
});

test('property: any instant printed as ISO parses back to itself', () => {
  fc.assert(
    fc.property(fc.date({ min: new Date('1970-01-01T00:00:00Z'), max: new Date('2999-12-31T23:59:59Z'), noInvalidDate: true }), (d) => {
      assert.equal(parseTimestamp(d.toISOString())?.getTime(), d.getTime());
    }),
  );
});

test('parseTimeBound: durations before now, timestamps absolute, anything else a usage error naming the option', () => {
  assert.deepEqual(parseTimeBound('15m', '--since'), { agoMs: 900_000 });
  assert.deepEqual(parseTimeBound('2024-05-01', '--until'), { at: new Date('2024-05-01T00:00:00Z') });
  assert.throws(() => parseTimeBound('last tuesday', '--since'), usage(/^--since last tuesday: expected a duration/));
});

test('resolveWindow counts durations back from now and refuses empty or reversed windows', () => {
  const now = Date.parse('2024-05-01T12:00:00Z');
  const w = resolveWindow({ agoMs: 3_600_000 }, { agoMs: 0 }, now);
  assert.equal(w.since.toISOString(), '2024-05-01T11:00:00.000Z');
  assert.equal(w.until.toISOString(), '2024-05-01T12:00:00.000Z');
  assert.equal(resolveWindow({ at: new Date('2024-04-30T00:00:00Z') }, { agoMs: 600_000 }, now).until.toISOString(), '2024-05-01T11:50:00.000Z');
  assert.throws(() => resolveWindow({ agoMs: 0 }, { agoMs: 3_600_000 }, now), usage(/is not before --until/));
  assert.throws(() => resolveWindow({ at: new Date(now) }, { at: new Date(now) }, now), usage(/is not before/));
});
