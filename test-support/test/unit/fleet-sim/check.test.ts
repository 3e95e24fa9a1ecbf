// The fleet checker's verdict: a target is whole only with every marker once and as many
// statement rows as entries written; lost, doubled and foreign markers are told apart.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { compareFleet, formatFleetCheck, type TargetStored } from '../../../src/fleet-sim/check.ts';
import { markerEntry } from '../../../src/fleet-sim/log-files.ts';

const stored = (rows: number, markerRows: number, distinct: number, min: number | null, max: number | null): TargetStored => ({
  rows,
  markerRows,
  distinctMarkers: distinct,
  minMarker: min,
  maxMarker: max,
});

test('whole, lost, duplicated, missing and foreign targets', () => {
  const written = [
    { name: 'a', markers: 10, statements: 40 },
    { name: 'b', markers: 10, statements: 40 },
    { name: 'c', markers: 10, statements: 40 },
    { name: 'd', markers: 3, statements: 5 },
    { name: 'e', markers: 10, statements: 40 },
    { name: 'f', markers: 10, statements: 40 },
  ];
  const check = compareFleet(
    written,
    new Map([
      ['a', stored(40, 10, 10, 1, 10)],
      ['b', stored(39, 9, 9, 1, 10)],
      ['c', stored(41, 11, 10, 1, 10)],
      ['e', stored(40, 10, 10, 2, 11)],
      ['f', stored(39, 10, 10, 1, 10)],
    ]),
  );
  assert.equal(check.targets, 6);
  assert.equal(check.whole, 1);
  assert.equal(check.lostMarkers, 1 + 3);
  assert.equal(check.duplicatedMarkers, 1);
  assert.equal(check.rowDifference, -1 + 1 - 5 - 1);
  assert.equal(check.problems.length, 5);
  assert.match(formatFleetCheck(check), /^1 of 6 targets whole; 4 markers lost, 1 duplicated; statement rows -6/);
  assert.match(
    check.problems.find((p) => p.startsWith('e:'))!,
    /2\.\.11/,
  );
});

test('markers are statement entries in the seq-load form the checkers read', () => {
  const line = markerEntry('2026-12-07 10:00:00.000 UTC', 'pglog-fleet', 'db00001', 42).toString('latin1');
  assert.equal(line, "2026-12-07 10:00:00.000 UTC [4242] app@bench LOG:  duration: 0.042 ms  statement: SELECT 'pglog-fleet:db00001:42'\n");
});
