// Kubernetes resource quantities parsed to numbers (used to size the collector's heap from
// its memory limit): binary and decimal suffixes, milli, exponents, plain numbers; anything
// else is CONFIG_INVALID.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { parseQuantity } from '../../../src/desired/quantity.ts';

describe('parseQuantity', () => {
  it('reads binary suffixes as powers of 1024', () => {
    assert.equal(parseQuantity('1Ki'), 1024);
    assert.equal(parseQuantity('512Mi'), 512 * 2 ** 20);
    assert.equal(parseQuantity('1.5Gi'), 1.5 * 2 ** 30);
    assert.equal(parseQuantity('2Ti'), 2 * 2 ** 40);
  });
  it('reads decimal suffixes as powers of 1000, m as milli', () => {
    assert.equal(parseQuantity('1k'), 1000);
    assert.equal(parseQuantity('128M'), 128e6);
    assert.equal(parseQuantity('1G'), 1e9);
    assert.equal(parseQuantity('3T'), 3e12);
    assert.equal(parseQuantity('250m'), 0.25);
    assert.equal(parseQuantity('1E'), 1e18);
  });
  it('reads exponents and plain numbers', () => {
    assert.equal(parseQuantity('1e3'), 1000);
    assert.equal(parseQuantity('12E6'), 12e6);
    assert.equal(parseQuantity('5e-1'), 0.5);
    assert.equal(parseQuantity('1073741824'), 2 ** 30);
    assert.equal(parseQuantity('0.5'), 0.5);
    assert.equal(parseQuantity('.5'), 0.5);
    assert.equal(parseQuantity(' 2 '), 2);
  });
  it('rejects what is not a quantity, with CONFIG_INVALID', () => {
    for (const bad of ['', 'Mi', '1MB', '1 Gi', '1e', 'abc', '1.2.3', '1KiB', '1gi']) {
      assert.throws(() => parseQuantity(bad), { name: 'PglogError', code: 'CONFIG_INVALID' }, bad);
    }
  });
});
