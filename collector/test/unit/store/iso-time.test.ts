// ISO 8601 → microseconds, exactly: the store keeps what the log says down to the microsecond.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import fc from 'fast-check';

import { toIsoTimestamp } from '../../../src/logformat/timestamp.ts';
import { isoToMicros as isoToMicrosValue, logTimeMicros, microsToIso, msToMicros } from '../../../src/store/iso-time.ts';

/** The value as a bigint, whatever form it came in (a number while a safe integer). */
const isoToMicros = (text: string): bigint | null => {
  const v = isoToMicrosValue(text);
  return v === null ? null : BigInt(v);
};

test('microsecond digits are kept, not rounded to milliseconds', () => {
  assert.equal(isoToMicros('2024-01-02T03:04:05.123456Z'), 1704164645123456n);
  assert.equal(isoToMicros('2024-01-02T03:04:05.1Z'), 1704164645100000n);
  assert.equal(isoToMicros('2024-01-02T03:04:05Z'), 1704164645000000n);
});

test('offsets are applied', () => {
  assert.equal(isoToMicros('2024-01-02T06:04:05.000001+03:00'), 1704164645000001n);
  assert.equal(isoToMicros('2024-01-01T22:34:05-04:30'), 1704164645000000n);
});

test('digits beyond microseconds round half up, carrying into the next second', () => {
  assert.equal(isoToMicros('2024-01-02T03:04:05.1234564Z'), 1704164645123456n);
  assert.equal(isoToMicros('2024-01-02T03:04:05.1234565Z'), 1704164645123457n);
  assert.equal(isoToMicros('2024-01-02T03:04:05.9999995Z'), 1704164646000000n);
});

test("a leap second is the next minute's first second, as PostgreSQL reads it", () => {
  assert.equal(isoToMicros('2016-12-31T23:59:60Z'), isoToMicros('2017-01-01T00:00:00Z'));
});

test('years below 100 are not taken for 19xx', () => {
  assert.equal(microsToIso(isoToMicros('0099-03-01T00:00:00Z') as bigint), '0099-03-01T00:00:00.000000Z');
});

test('a number while a safe integer (every real log: no bigint per row), a bigint beyond, exact either way', () => {
  assert.equal(isoToMicrosValue('2024-01-02T03:04:05.123456Z'), 1704164645123456);
  assert.equal(isoToMicrosValue('1700-01-01T00:00:00.000001Z'), -8520336000000000 + 1);
  assert.equal(isoToMicrosValue('9999-12-31T23:59:59.999999Z'), 253402300799999999n);
  assert.equal(isoToMicrosValue('0001-01-01T00:00:00Z'), -62135596800000000n);
  // The cached second (the fast path) of a far year stays exact too.
  assert.equal(isoToMicrosValue('9999-12-31T23:59:59.000001Z'), 253402300799000001n);
  assert.equal(typeof msToMicros(Date.now()), 'number');
});

test('text that is not an instant gives null', () => {
  for (const s of [
    '2024-01-02 03:04:05.123 IST', // the parser's text as logged, unknown zone
    '2024-01-02T03:04:05', // no zone
    '2024-13-02T03:04:05Z',
    '2023-02-29T00:00:00Z',
    '2024-01-02T24:00:00Z',
    '2024-01-02T03:60:00Z',
    '2024-01-02T03:04:05+16:00',
    '',
    'yesterday',
  ]) {
    assert.equal(isoToMicros(s), null, s);
  }
  assert.equal(isoToMicros('2024-02-29T00:00:00Z'), 1709164800000000n);
});

test('property: agrees with Date.parse to the millisecond and keeps the sub-millisecond digits', () => {
  fc.assert(
    fc.property(
      fc.date({ min: new Date('1970-01-01T00:00:00Z'), max: new Date('2200-12-31T23:59:59Z'), noInvalidDate: true }),
      fc.integer({ min: 0, max: 999 }),
      fc.integer({ min: -14 * 60, max: 14 * 60 }),
      (date, subMs, offsetMin) => {
        // The same instant written in another zone.
        const local = new Date(date.getTime() + offsetMin * 60_000).toISOString().slice(0, 23);
        const sign = offsetMin < 0 ? '-' : '+';
        const abs = Math.abs(offsetMin);
        const zone = offsetMin === 0 ? 'Z' : `${sign}${String(Math.floor(abs / 60)).padStart(2, '0')}:${String(abs % 60).padStart(2, '0')}`;
        const text = `${local}${String(subMs).padStart(3, '0')}${zone}`;
        assert.equal(isoToMicros(text), BigInt(date.getTime()) * 1000n + BigInt(subMs), text);
      },
    ),
    { numRuns: 500 },
  );
});

test('microsToIso and msToMicros', () => {
  assert.equal(microsToIso(1704164645123456n), '2024-01-02T03:04:05.123456Z');
  assert.equal(microsToIso(-1n), '1969-12-31T23:59:59.999999Z');
  assert.equal(microsToIso(1704164645123456), '2024-01-02T03:04:05.123456Z');
  assert.equal(msToMicros(1704164645123), 1704164645123000);
});

test('property: consecutive timestamps of the same second (the cached path) convert like any other', () => {
  fc.assert(
    fc.property(
      fc.date({ min: new Date('2000-01-01T00:00:00Z'), max: new Date('2100-01-01T00:00:00Z'), noInvalidDate: true }),
      fc.array(fc.tuple(fc.option(fc.stringMatching(/^\d{1,9}$/), { nil: undefined }), fc.constantFrom('Z', '+03:00', '-05:30')), {
        minLength: 1,
        maxLength: 6,
      }),
      (date, stamps) => {
        const head = date.toISOString().slice(0, 19);
        for (const [fraction, zone] of stamps) {
          const text = `${head}${fraction === undefined ? '' : `.${fraction}`}${zone}`;
          const offsetMs = zone === 'Z' ? 0 : (zone.startsWith('-') ? -1 : 1) * (Number(zone.slice(1, 3)) * 60 + Number(zone.slice(4, 6))) * 60_000;
          const digits = (fraction ?? '').padEnd(7, '0');
          const micros = BigInt(Number(digits.slice(0, 6)) + (Number(digits[6]) >= 5 ? 1 : 0));
          const expected = BigInt(Date.parse(`${head}Z`) - offsetMs) * 1000n + micros;
          assert.equal(isoToMicros(text), expected, text);
        }
      },
    ),
    { numRuns: 500 },
  );
});

test('property: a text repeated (the last-text shortcut) converts like the first time, also after a text that is not an instant', () => {
  const pool = [
    '2026-11-26T08:00:00.123Z',
    '2026-11-26T08:00:00.124Z',
    '2026-11-26T08:00:00.123+03:00',
    '2026-11-26T08:00:01Z',
    '2026-13-26T08:00:00.123Z',
    '2026-11-26 08:00:00.123 XYZ',
  ];
  const expected = pool.map((t) => {
    isoToMicrosValue('1999-01-01T00:00:00Z'); // another text first: no shortcut taken
    return isoToMicrosValue(t);
  });
  assert.equal(expected[4], null);
  assert.equal(expected[5], null);
  fc.assert(
    fc.property(fc.array(fc.integer({ min: 0, max: pool.length - 1 }), { minLength: 1, maxLength: 20 }), (picks) => {
      for (const k of picks) assert.equal(isoToMicrosValue(pool[k]!), expected[k], pool[k]);
    }),
    { numRuns: 300 },
  );
});

test('a timestamp as logged converts to its microseconds, or null when its zone is unknown', () => {
  assert.equal(logTimeMicros('2024-01-02 03:04:05.123 UTC'), 1704164645123000);
  assert.equal(logTimeMicros('2024-01-02 03:04:05.124 UTC'), 1704164645124000);
  assert.equal(logTimeMicros('2024-01-02 06:04:05.125 +03'), 1704164645125000);
  assert.equal(logTimeMicros('2024-01-02 03:04:05 UTC'), 1704164645000000);
  assert.equal(logTimeMicros('2024-01-02 03:04:05.126 XYZ'), null);
  assert.equal(logTimeMicros('2024-01-02 03:04:05.126'), null);
  assert.equal(logTimeMicros('1704164645.127'), 1704164645127000);
});

test('property: a timestamp as logged converts as its ISO text would, whatever came before it (the same-second shortcut)', () => {
  const heads = [
    '2026-11-26 08:00:00',
    '2026-11-26 08:00:01',
    '2026-11-26 08:01:00',
    '2024-02-29 23:59:59',
    '2026-02-30 00:00:00',
    '1969-12-31 23:59:59',
    '2255-06-01 00:00:00',
    '2026-11-26 24:00:00',
  ];
  const zones = [' UTC', ' CET', ' +03', ' -0330', ' +05:30', ' XYZ', '', ' utc'];
  const stamp = fc.oneof(
    fc
      .record({ head: fc.constantFrom(...heads), digits: fc.stringMatching(/^\d{0,9}$/), zone: fc.constantFrom(...zones) })
      .map(({ head, digits, zone }) => `${head}${digits === '' ? '' : `.${digits}`}${zone}`),
    fc.stringMatching(/^\d{10}(\.\d{1,6})?$/),
    fc.string({ maxLength: 30 }),
  );
  fc.assert(
    fc.property(fc.array(stamp, { minLength: 1, maxLength: 30 }), (texts) => {
      for (const text of texts) assert.equal(logTimeMicros(text), isoToMicrosValue(toIsoTimestamp(text)), text);
    }),
    { numRuns: 1000 },
  );
});
