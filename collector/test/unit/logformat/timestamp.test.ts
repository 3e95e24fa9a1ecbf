// Log timestamps to ISO 8601: UTC, numeric offsets, the unambiguous zone abbreviations, %n
// epoch seconds; ambiguous or odd input comes back as logged. Fast-check properties: it never
// throws, and any date logged as %m in UTC or as %n round-trips.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import fc from 'fast-check';

import { toIsoTimestamp } from '../../../src/logformat/timestamp.ts';

/** A timestamp toIsoTimestamp gives back as logged (ambiguous, unknown or odd). */
const AS_LOGGED = null;

/** Logged timestamp → what toIsoTimestamp gives, by what the cases are about (one test each, its rows in order). */
const CASES: Record<string, [string, string | typeof AS_LOGGED][]> = {
  'UTC and GMT: Z, fraction kept as logged': [
    ['2024-01-02 03:04:05.123 UTC', '2024-01-02T03:04:05.123Z'],
    ['2024-01-02 03:04:05 GMT', '2024-01-02T03:04:05Z'],
    ['2024-01-02 03:04:05.123 Z', '2024-01-02T03:04:05.123Z'],
  ],
  'numeric zones': [
    ['2024-01-02 03:04:05.123 +03', '2024-01-02T03:04:05.123+03:00'],
    ['2024-01-02 03:04:05 -0330', '2024-01-02T03:04:05-03:30'],
    ['2024-01-02 03:04:05 +05:30', '2024-01-02T03:04:05+05:30'],
    ['2024-01-02 03:04:05 +00', '2024-01-02T03:04:05Z'],
  ],
  'common abbreviations': [
    ['2024-01-02 03:04:05.123 MSK', '2024-01-02T03:04:05.123+03:00'],
    ['2024-07-02 03:04:05 CEST', '2024-07-02T03:04:05+02:00'],
    ['2024-01-02 03:04:05 PST', '2024-01-02T03:04:05-08:00'],
    ['2024-01-02 03:04:05 JST', '2024-01-02T03:04:05+09:00'],
  ],
  'ambiguous or unknown zones and odd shapes: as logged': [
    ['2024-01-02 03:04:05 IST', AS_LOGGED],
    ['2024-01-02 03:04:05 CST', AS_LOGGED],
    ['2024-01-02 03:04:05 XYZT', AS_LOGGED],
    ['2024-01-02 03:04:05', AS_LOGGED],
    ['2024-01-02 03:04:05.', AS_LOGGED],
    ['garbage', AS_LOGGED],
    ['', AS_LOGGED],
    ['2024-13-02x03:04:05 UTC', AS_LOGGED],
    ['2024-01-02 03:04:05 +99', AS_LOGGED],
  ],
  'consecutive timestamps: same second with other fractions, zones and shapes': [
    ['2024-01-02 03:04:05.123 UTC', '2024-01-02T03:04:05.123Z'],
    ['2024-01-02 03:04:05.124 UTC', '2024-01-02T03:04:05.124Z'],
    ['2024-01-02 03:04:05.124 MSK', '2024-01-02T03:04:05.124+03:00'],
    ['2024-01-02 03:04:05.125 MSK', '2024-01-02T03:04:05.125+03:00'],
    ['2024-01-02 03:04:05.1255 MSK', '2024-01-02T03:04:05.1255+03:00'],
    ['2024-01-02 03:04:05.126 MSD', '2024-01-02T03:04:05.126+04:00'],
    ['2024-01-02 03:04:05.12x MSD', AS_LOGGED],
    ['2024-01-02 03:04:05. MSD', AS_LOGGED],
    ['2024-01-02 03:04:05.127 XYZ', AS_LOGGED],
    ['2024-01-02 03:04:05.128 MSD', '2024-01-02T03:04:05.128+04:00'],
    ['2024-01-02 03:04:05.128', AS_LOGGED],
    ['2024-01-02 03:04:05.129 MSDX', AS_LOGGED],
    ['2024-01-02 03:04:05 MSD', '2024-01-02T03:04:05+04:00'],
    ['2024-01-02 03:04:06.000 MSD', '2024-01-02T03:04:06.000+04:00'],
    ['2024-01-02 03:04:05.130 MSD', '2024-01-02T03:04:05.130+04:00'],
  ],
  '%n epoch seconds': [
    ['1700000000.123', '2023-11-14T22:13:20.123Z'],
    ['1700000000', '2023-11-14T22:13:20Z'],
  ],
};

for (const [name, cases] of Object.entries(CASES)) {
  void test(name, () => {
    for (const [logged, iso] of cases) assert.equal(toIsoTimestamp(logged), iso ?? logged, logged);
  });
}

void test('never throws; result is the input or ISO-shaped', () => {
  fc.assert(
    fc.property(fc.string(), (s) => {
      const r = toIsoTimestamp(s);
      assert.ok(r === s || /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)$/.test(r), r);
    }),
    { numRuns: 2000 },
  );
  fc.assert(
    fc.property(fc.date({ min: new Date(0), max: new Date(4e12), noInvalidDate: true }), (d) => {
      const iso = d.toISOString();
      const logged = `${iso.slice(0, 10)} ${iso.slice(11, 23)} UTC`;
      assert.equal(toIsoTimestamp(logged), iso);
      assert.equal(new Date(toIsoTimestamp(`${(d.getTime() / 1000).toFixed(3)}`)).getTime(), d.getTime());
    }),
  );
});
