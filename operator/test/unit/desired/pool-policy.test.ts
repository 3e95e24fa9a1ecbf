// What a CollectorPool may ask for (security review F3, F11): images only from the operator's
// allow-list (a repository with any tag or digest, or a prefix ending in `/`; exact text, so
// a look-alike repository is not a match), and workloads only in the collector namespaces.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { imageAllowed, imageRepository, parseAllowedImages, policyRefusal } from '../../../src/desired/pool-policy.ts';
import { samplePool } from '../../helpers/pool-fixtures.ts';

describe('pool policy', () => {
  it('the repository of an image reference: without tag and digest, a registry port kept', () => {
    for (const [reference, repository] of [
      ['ghcr.io/pglog/pglog:1.2.3', 'ghcr.io/pglog/pglog'],
      ['ghcr.io/pglog/pglog@sha256:0123', 'ghcr.io/pglog/pglog'],
      ['ghcr.io/pglog/pglog:1@sha256:0123', 'ghcr.io/pglog/pglog'],
      ['localhost:5000/pglog', 'localhost:5000/pglog'],
      ['localhost:5000/pglog:dev', 'localhost:5000/pglog'],
    ] as const) {
      assert.equal(imageRepository(reference), repository, reference);
    }
  });

  it('an entry allows its repository with any tag or digest; a prefix ending in / allows what is under it; nothing else', () => {
    const allowed = parseAllowedImages('ghcr.io/pglog/pglog,registry.example/team/');
    for (const image of [
      'ghcr.io/pglog/pglog',
      'ghcr.io/pglog/pglog:1.0',
      'ghcr.io/pglog/pglog@sha256:abcd',
      'registry.example/team/pglog:2',
      'registry.example/team/sub/x',
    ]) {
      assert.ok(imageAllowed(image, allowed), image);
    }
    for (const image of [
      'ghcr.io/pglog/pglog-evil:1.0',
      'ghcr.io/pglog/pglogx',
      'ghcr.io/pglog:1',
      'GHCR.io/pglog/pglog:1',
      'docker.io/ghcr.io/pglog/pglog',
      'registry.example/team-evil/x',
      'registry.example/team',
      'registry.example/team/',
      'ghcr.io/attacker/anything:latest',
    ]) {
      assert.ok(!imageAllowed(image, allowed), image);
    }
  });

  it('a pool with an image outside the list is refused naming the field and the image; its namespace first', () => {
    const policy = { allowedImages: ['reg/pglog'] };
    assert.equal(policyRefusal(samplePool(), policy, 'reg/pglog:1'), undefined);
    const foreign = policyRefusal(samplePool({ collector: { image: 'evil/x:1', imagePullPolicy: 'IfNotPresent' } }), policy, 'reg/pglog:1');
    assert.equal(foreign?.reason, 'ImageNotAllowed');
    assert.match(foreign.message, /^spec\.collector\.image evil\/x:1 and spec\.sidecar\.image evil\/x:1 not in the operator's allowed images \(reg\/pglog\)/);
    const sidecar = policyRefusal(samplePool({ sidecar: { image: 'evil/x:1' } }), policy, 'reg/pglog:1');
    assert.match(sidecar!.message, /^spec\.sidecar\.image evil\/x:1 not in/);
    const elsewhere = policyRefusal(samplePool({ sidecar: { image: 'evil/x:1' } }), { ...policy, collectorNamespaces: ['db'] }, 'reg/pglog:1');
    assert.deepEqual(elsewhere?.reason, 'NamespaceNotAllowed');
    assert.match(elsewhere.message, /namespace pglog is not a collector namespace of this operator \(db\)/);
    assert.equal(policyRefusal(samplePool(), { ...policy, collectorNamespaces: ['pglog'] }, 'reg/pglog:1'), undefined);
  });
});
