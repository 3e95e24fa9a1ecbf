// Which pool a target belongs to: label selectors (matchLabels, the four operators, AND,
// invalid ones refused) and selectPoolTargets, where spec.pool wins over selectors, conflicts
// go to the first pool by name, input order does not matter, and duplicate pool names are refused.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { matchesLabelSelector, selectPoolTargets } from '../../../src/desired/assignment.ts';
import { samplePool, sampleTarget } from '../../helpers/pool-fixtures.ts';

describe('matchesLabelSelector', () => {
  const labels = { env: 'prod', tier: 'db' };
  it('matchLabels: every pair must be there', () => {
    assert.equal(matchesLabelSelector({ matchLabels: { env: 'prod' } }, labels), true);
    assert.equal(matchesLabelSelector({ matchLabels: { env: 'prod', tier: 'web' } }, labels), false);
    assert.equal(matchesLabelSelector({ matchLabels: { env: 'prod' } }, undefined), false);
  });
  it('an empty selector matches everything', () => {
    assert.equal(matchesLabelSelector({}, undefined), true);
    assert.equal(matchesLabelSelector({ matchLabels: {}, matchExpressions: [] }, labels), true);
  });
  it('In, NotIn, Exists, DoesNotExist', () => {
    const m = (operator: string, key: string, values?: string[]): boolean =>
      matchesLabelSelector({ matchExpressions: [{ key, operator, ...(values === undefined ? {} : { values }) }] }, labels);
    assert.equal(m('In', 'env', ['prod', 'stage']), true);
    assert.equal(m('In', 'env', ['stage']), false);
    assert.equal(m('In', 'zone', ['a']), false);
    assert.equal(m('NotIn', 'env', ['stage']), true);
    assert.equal(m('NotIn', 'env', ['prod']), false);
    assert.equal(m('NotIn', 'zone', ['a']), true, 'NotIn matches a missing key');
    assert.equal(m('Exists', 'tier'), true);
    assert.equal(m('Exists', 'zone'), false);
    assert.equal(m('DoesNotExist', 'zone'), true);
    assert.equal(m('DoesNotExist', 'tier'), false);
  });
  it('expressions and labels combine with AND', () => {
    assert.equal(matchesLabelSelector({ matchLabels: { env: 'prod' }, matchExpressions: [{ key: 'tier', operator: 'In', values: ['web'] }] }, labels), false);
  });
  it('an unknown operator, or In without values, is CONFIG_INVALID', () => {
    assert.throws(() => matchesLabelSelector({ matchExpressions: [{ key: 'env', operator: 'Gt', values: ['1'] }] }, labels), { code: 'CONFIG_INVALID' });
    assert.throws(() => matchesLabelSelector({ matchExpressions: [{ key: 'env', operator: 'In' }] }, labels), { code: 'CONFIG_INVALID' });
  });
});

describe('selectPoolTargets', () => {
  const a = samplePool({ targetSelector: { matchLabels: { env: 'prod' } } }, 'alpha');
  const b = samplePool({ targetSelector: { matchExpressions: [{ key: 'env', operator: 'Exists' }] } }, 'beta');
  const c = samplePool({}, 'gamma');
  const names = (m: Map<string, { metadata: { name: string } }[]>): Record<string, string[]> =>
    Object.fromEntries([...m].map(([k, v]) => [k, v.map((t) => t.metadata.name)]));

  it('spec.pool names the pool; else the selector; conflicts: spec.pool wins, else the first pool name', () => {
    const targets = [
      sampleTarget({ name: 't-named', pool: 'gamma' }),
      sampleTarget({ name: 't-named-and-labelled', pool: 'beta', labels: { env: 'prod' } }),
      sampleTarget({ name: 't-both-select', labels: { env: 'prod' } }),
      sampleTarget({ name: 't-beta-only', labels: { env: 'dev' } }),
      sampleTarget({ name: 't-nobody', labels: { other: 'x' } }),
      sampleTarget({ name: 't-unknown-pool', pool: 'delta', labels: { env: 'dev' } }),
      sampleTarget({ name: 't-other-namespace', pool: 'gamma', namespace: 'elsewhere' }),
    ];
    const expected = {
      alpha: ['t-both-select'],
      beta: ['t-beta-only', 't-named-and-labelled', 't-unknown-pool'],
      gamma: ['t-named'],
    };
    assert.deepEqual(names(selectPoolTargets([a, b, c], targets)), expected);
    assert.deepEqual(names(selectPoolTargets([c, b, a], [...targets].reverse())), expected, 'input order does not matter');
  });
  it('every pool appears, a pool without a selector gets only named targets', () => {
    assert.deepEqual(names(selectPoolTargets([c], [sampleTarget({ name: 'x', labels: { env: 'prod' } })])), { gamma: [] });
  });
  it('two pools with one name are refused', () => {
    assert.throws(() => selectPoolTargets([a, a], []), { code: 'CONFIG_INVALID' });
  });
});
