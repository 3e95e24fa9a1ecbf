// The Lease arithmetic of leader election, with times passed in: MicroTime format, expiry
// measured from when this candidate saw the record change on its own clock (not the
// renewTime's wall clock), when a lease may be taken at once, and takeover vs renewal fields.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { mayAcquire, microTime, observe, takeLease } from '@pglog/common/kube/leader-election.ts';

describe('leader election: the lease math', () => {
  test('MicroTime has six fractional digits', () => {
    assert.equal(microTime(Date.UTC(2026, 10, 23, 15, 4, 5, 123)), '2026-11-23T15:04:05.123000Z');
  });

  test('expiry is measured from when this candidate saw the record change, on its own clock', () => {
    const held = { holderIdentity: 'a', renewTime: '2000-01-01T00:00:00.000000Z', leaseDurationSeconds: 15, leaseTransitions: 0 };
    // The renewTime is long past by the wall clock, but we only just saw it: wait a lease duration.
    const first = observe(undefined, held, 1_000);
    assert.equal(mayAcquire(held, first, 1_000, 'b', 15_000), false);
    const same = observe(first, held, 10_000);
    assert.equal(same.at, 1_000, 'an unchanged record keeps its first observation');
    assert.equal(mayAcquire(held, same, 15_999, 'b', 15_000), false);
    assert.equal(mayAcquire(held, same, 16_000, 'b', 15_000), true);
    // A renewal restarts the wait.
    const renewed = observe(same, { ...held, renewTime: '2000-01-01T00:00:02.000000Z' }, 12_000);
    assert.equal(renewed.at, 12_000);
    assert.equal(mayAcquire(held, renewed, 16_000, 'b', 15_000), false);
  });

  test("the holder itself, an empty holder (released) and no lease may be taken at once; the holder's duration counts", () => {
    const o = observe(undefined, undefined, 0);
    assert.equal(mayAcquire(undefined, o, 0, 'b', 15_000), true);
    assert.equal(mayAcquire({ holderIdentity: '' }, o, 0, 'b', 15_000), true);
    assert.equal(mayAcquire({ holderIdentity: 'b', leaseDurationSeconds: 15 }, o, 0, 'b', 15_000), true);
    assert.equal(mayAcquire({ holderIdentity: 'a', leaseDurationSeconds: 2 }, o, 2_000, 'b', 15_000), true);
  });

  test('takeLease: a takeover counts a transition and sets acquireTime; a renewal keeps both', () => {
    const taken = takeLease({ holderIdentity: 'a', acquireTime: 'x', leaseTransitions: 4 }, 'b', 1_000, 15_000);
    assert.deepEqual(taken, { holderIdentity: 'b', leaseDurationSeconds: 15, acquireTime: microTime(1_000), renewTime: microTime(1_000), leaseTransitions: 5 });
    const renewed = takeLease(taken, 'b', 3_000, 15_000);
    assert.equal(renewed.acquireTime, microTime(1_000));
    assert.equal(renewed.renewTime, microTime(3_000));
    assert.equal(renewed.leaseTransitions, 5);
    assert.equal(takeLease(undefined, 'b', 0, 15_000).leaseTransitions, 0);
    assert.equal(takeLease({ holderIdentity: '', leaseTransitions: 5 }, 'b', 0, 15_000).leaseTransitions, 6, 'taking a released lease is a transition too');
  });
});
