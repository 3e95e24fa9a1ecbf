// The store writer's connection slots (connection-pool.ts): one slot per operation, every
// slot for migrations and maintenance, granted strictly in the order asked.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { ConnectionPool } from '../../../src/store/connection-pool.ts';

const settled = (): Promise<void> => new Promise((r) => setImmediate(r));

describe('ConnectionPool', () => {
  test('leases up to its size side by side; the next waits for a release', async () => {
    const pool = new ConnectionPool(2);
    const a = await pool.lease(false);
    const b = await pool.lease(false);
    assert.notEqual(a[0]!.index, b[0]!.index);
    let third: number | null = null;
    void pool.lease(false).then((s) => {
      third = s[0]!.index;
    });
    await settled();
    assert.equal(third, null);
    pool.release(b);
    await settled();
    assert.equal(third, b[0]!.index);
  });

  test('a lease of every slot waits for all to be free, and single leases asked after it wait behind it', async () => {
    const pool = new ConnectionPool(3);
    const first = await pool.lease(false);
    const order: string[] = [];
    const all = pool.lease(true).then((s) => {
      order.push('all');
      return s;
    });
    const single = pool.lease(false).then((s) => {
      order.push('single');
      return s;
    });
    await settled();
    assert.deepEqual(order, [], 'two slots are free, but the lease of all came first and waits');
    pool.release(first);
    const slots = await all;
    assert.equal(slots.length, 3);
    await settled();
    assert.deepEqual(order, ['all'], 'nothing runs beside the lease of all');
    pool.release(slots);
    await single;
    assert.deepEqual(order, ['all', 'single']);
  });

  test('with little load the lowest slot is used again, so the other connections are never made', async () => {
    const pool = new ConnectionPool(4);
    for (let i = 0; i < 3; i++) {
      const s = await pool.lease(false);
      assert.equal(s[0]!.index, 0);
      pool.release(s);
    }
  });
});
