// Status conditions and semantic equality, the pure parts that decide whether the reconcile
// loop writes a status: setCondition's lastTransitionTime and generation rules (returning the
// same array when nothing changed), order-free comparison, JSON deep equality.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import type { Condition } from '@pglog/common/api/common.ts';

import { conditionsEqual, findCondition, semanticEqual, setCondition } from '../../../src/desired/conditions.ts';

const T1 = '2026-11-23T10:00:00.000Z';
const T2 = '2026-11-23T11:00:00.000Z';

describe('setCondition', () => {
  it('adds a condition with the time and generation', () => {
    const out = setCondition(undefined, { type: 'Ready', status: 'False', reason: 'Progressing', message: 'starting' }, T1, 3);
    assert.deepEqual(out, [{ type: 'Ready', status: 'False', observedGeneration: 3, lastTransitionTime: T1, reason: 'Progressing', message: 'starting' }]);
  });
  it('returns the same array when nothing changed', () => {
    const list = setCondition([], { type: 'Ready', status: 'True', reason: 'AllReady', message: 'ok' }, T1, 1);
    assert.equal(setCondition(list, { type: 'Ready', status: 'True', reason: 'AllReady', message: 'ok' }, T2, 1), list);
  });
  it('keeps lastTransitionTime when only the reason or message changes', () => {
    const list = setCondition([], { type: 'Ready', status: 'False', reason: 'A', message: 'a' }, T1);
    const out = setCondition(list, { type: 'Ready', status: 'False', reason: 'B', message: 'b' }, T2);
    assert.notEqual(out, list);
    assert.equal(out[0]!.lastTransitionTime, T1);
    assert.equal(out[0]!.reason, 'B');
    assert.equal(list[0]!.reason, 'A', 'the input is not mutated');
  });
  it('moves lastTransitionTime when the status changes, and touches only that type', () => {
    let list: Condition[] = setCondition([], { type: 'Ready', status: 'False', reason: 'A', message: '' }, T1);
    list = setCondition(list, { type: 'Degraded', status: 'False', reason: 'None', message: '' }, T1);
    const out = setCondition(list, { type: 'Ready', status: 'True', reason: 'A', message: '' }, T2);
    assert.equal(findCondition(out, 'Ready')!.lastTransitionTime, T2);
    assert.equal(out[1], list[1]);
    assert.deepEqual(
      out.map((c) => c.type),
      ['Ready', 'Degraded'],
    );
  });
  it('a new generation alone is a change', () => {
    const list = setCondition([], { type: 'Ready', status: 'True', reason: 'A', message: '' }, T1, 1);
    const out = setCondition(list, { type: 'Ready', status: 'True', reason: 'A', message: '' }, T2, 2);
    assert.notEqual(out, list);
    assert.equal(out[0]!.observedGeneration, 2);
    assert.equal(out[0]!.lastTransitionTime, T1);
  });
});

describe('conditionsEqual', () => {
  const a: Condition = { type: 'Ready', status: 'True', lastTransitionTime: T1, reason: 'R', message: 'm' };
  const b: Condition = { type: 'Degraded', status: 'False', lastTransitionTime: T1, reason: 'R', message: 'm' };
  it('ignores order, compares every field', () => {
    assert.equal(conditionsEqual([a, b], [b, a]), true);
    assert.equal(conditionsEqual(undefined, []), true);
    assert.equal(conditionsEqual([a], [{ ...a, message: 'other' }]), false);
    assert.equal(conditionsEqual([a], [a, b]), false);
    assert.equal(conditionsEqual([a, a], [a, b]), false);
  });
});

describe('semanticEqual', () => {
  it('compares JSON values deeply, undefined keys as absent, key order ignored', () => {
    assert.equal(semanticEqual({ a: 1, b: [1, { c: 'x' }] }, { b: [1, { c: 'x' }], a: 1 }), true);
    assert.equal(semanticEqual({ a: 1, b: undefined }, { a: 1 }), true);
    assert.equal(semanticEqual({ a: 1 }, { a: 1, b: null }), false);
    assert.equal(semanticEqual([1, 2], [2, 1]), false);
    assert.equal(semanticEqual({ a: [1] }, { a: { 0: 1 } }), false);
    assert.equal(semanticEqual('1', 1), false);
    assert.equal(semanticEqual(null, {}), false);
    assert.equal(semanticEqual({ x: { y: { z: 1 } } }, { x: { y: { z: 2 } } }), false);
  });
});
