// What a CollectorPool may ask for (security review F3, F11, R3, R10): images only from the
// operator's allow-list (a repository with any tag or digest, a prefix ending in `/`, a tag
// pattern or a digest; every entry names its registry; references parsed by the grammar and
// compared as written, so a look-alike is not a match), its store only from the allowed
// Secrets, and workloads only in the collector namespaces.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { imageAllowed, imageRepository, parseAllowedImages } from '../../../src/desired/image-allow-list.ts';
import { parseStoreSecretList, policyRefusal, storeSecretAllowed } from '../../../src/desired/pool-policy.ts';
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
      `ghcr.io/pglog/pglog@sha256:${'ab'.repeat(32)}`,
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
      // Not references: the text after @ is no digest, so this names no repository at all.
      'ghcr.io/pglog/pglog@evil.com/x',
      'ghcr.io/pglog/pglog@sha256:abcd',
      'ghcr.io/pglog/pglog:1 ',
      'ghcr.io/pglog/pglog:-1',
      'registry.example/team/../x',
    ]) {
      assert.ok(!imageAllowed(image, allowed), image);
    }
  });

  it('a pool with an image outside the list is refused naming the field and the image; its namespace first', () => {
    const policy = { allowedImages: ['reg.example/pglog'] };
    assert.equal(policyRefusal(samplePool(), policy, 'reg.example/pglog:1'), undefined);
    const foreign = policyRefusal(samplePool({ collector: { image: 'evil/x:1', imagePullPolicy: 'IfNotPresent' } }), policy, 'reg.example/pglog:1');
    assert.equal(foreign?.reason, 'ImageNotAllowed');
    assert.match(
      foreign.message,
      /^spec\.collector\.image evil\/x:1 and spec\.sidecar\.image evil\/x:1 not in the operator's allowed images \(reg\.example\/pglog\)/,
    );
    const sidecar = policyRefusal(samplePool({ sidecar: { image: 'evil/x:1' } }), policy, 'reg.example/pglog:1');
    assert.match(sidecar!.message, /^spec\.sidecar\.image evil\/x:1 not in/);
    const elsewhere = policyRefusal(samplePool({ sidecar: { image: 'evil/x:1' } }), { ...policy, collectorNamespaces: ['db'] }, 'reg.example/pglog:1');
    assert.deepEqual(elsewhere?.reason, 'NamespaceNotAllowed');
    assert.match(elsewhere.message, /namespace pglog is not a collector namespace of this operator \(db\)/);
    assert.equal(policyRefusal(samplePool(), { ...policy, collectorNamespaces: ['pglog'] }, 'reg.example/pglog:1'), undefined);
  });

  it('every entry names its registry host: a host-less one is refused at start, naming it', () => {
    for (const entry of ['pglog', 'pglog/pglog', 'library/pglog:1', 'team/']) {
      assert.throws(
        () => parseAllowedImages(`ghcr.io/pglog/pglog,${entry}`),
        (e: Error) => e.message.includes(`--allowed-images entry '${entry}' names no registry host`) && /docker\.io\/library\/pglog/.test(e.message),
        entry,
      );
    }
    // A host is a first component with a dot or a port, or localhost.
    assert.deepEqual(parseAllowedImages('localhost/pglog,localhost:5000/x/,10.0.0.1:5000/pglog,[::1]:5000/pglog'), [
      'localhost/pglog',
      'localhost:5000/x/',
      '10.0.0.1:5000/pglog',
      '[::1]:5000/pglog',
    ]);
    assert.ok(imageAllowed('[::1]:5000/pglog:2', ['[::1]:5000/pglog']));
  });

  it('entries that are not references are refused, naming the part that is wrong', () => {
    for (const [entry, why] of [
      ['ghcr.io/pglog/pglog@evil.com/x', /digest 'evil\.com\/x' is not sha256:/],
      ['ghcr.io/pglog/pglog@sha256:abc', /digest 'sha256:abc' is not sha256: and 64/],
      ['ghcr.io/Pglog/pglog', /path component 'Pglog'/],
      ['GHCR.io/pglog/pglog', /write its registry 'GHCR\.io' in lower case/],
      ['ghcr.io/pglog/*', /path component '\*'/],
      ['ghcr.io/pglog/pglog:-1', /tag '-1'/],
      ['ghcr.io/pglog/:1/', /path component ':1'|tag/],
      [`ghcr.io/pglog/pglog:1@sha256:${'a'.repeat(64)}`, /has both a tag and a digest/],
      [`ghcr.io/team@sha256:${'a'.repeat(64)}/`, /./],
    ] as const) {
      assert.throws(
        () => parseAllowedImages(entry),
        (e: Error) => e.message.startsWith(`operator: --allowed-images entry '${entry}' `) && why.test(e.message),
        entry,
      );
    }
  });

  it('a digest entry pins that digest: any tag beside it, nothing without it', () => {
    const digest = `sha256:${'0f'.repeat(32)}`;
    const allowed = parseAllowedImages(`ghcr.io/pglog/pglog@${digest}`);
    assert.ok(imageAllowed(`ghcr.io/pglog/pglog@${digest}`, allowed));
    assert.ok(imageAllowed(`ghcr.io/pglog/pglog:1.4.7@${digest}`, allowed), 'the runtime pulls the digest; the tag is a label');
    for (const image of [
      'ghcr.io/pglog/pglog:1.4.7',
      'ghcr.io/pglog/pglog',
      `ghcr.io/pglog/pglog@sha256:${'1f'.repeat(32)}`,
      `ghcr.io/pglog/other@${digest}`,
    ]) {
      assert.ok(!imageAllowed(image, allowed), image);
    }
  });

  it('a tag pattern allows the tags it matches (* any run of tag characters), never an image with a digest', () => {
    const allowed = parseAllowedImages('ghcr.io/pglog/pglog:1.4.*,registry.example/pglog:stable,registry.example/x:*-fips');
    for (const image of [
      'ghcr.io/pglog/pglog:1.4.7',
      'ghcr.io/pglog/pglog:1.4.',
      'ghcr.io/pglog/pglog:1.4.10-rc1',
      'registry.example/pglog:stable',
      'registry.example/x:2-fips',
    ]) {
      assert.ok(imageAllowed(image, allowed), image);
    }
    for (const image of [
      'ghcr.io/pglog/pglog:1.3.9',
      'ghcr.io/pglog/pglog:1.40',
      'ghcr.io/pglog/pglog:11.4.1',
      'ghcr.io/pglog/pglog',
      // The runtime would run the digest, whatever the tag says.
      `ghcr.io/pglog/pglog:1.4.7@sha256:${'ab'.repeat(32)}`,
      'registry.example/pglog:stable2',
      'registry.example/pglog',
      'registry.example/x:2-fips-not',
    ]) {
      assert.ok(!imageAllowed(image, allowed), image);
    }
    assert.ok(imageAllowed('registry.example/pglog', parseAllowedImages('registry.example/pglog:latest')), 'no tag is latest');
  });

  it('store Secrets: NAME in any collector namespace, NAMESPACE/NAME in that one; bad entries refused', () => {
    const allowed = parseStoreSecretList(' pglog-store, team-b/store-b ');
    assert.deepEqual(allowed, ['pglog-store', 'team-b/store-b']);
    assert.ok(storeSecretAllowed('team-a', 'pglog-store', allowed));
    assert.ok(storeSecretAllowed('team-b', 'store-b', allowed));
    assert.ok(!storeSecretAllowed('team-a', 'store-b', allowed));
    assert.ok(!storeSecretAllowed('team-a', 'team-b/store-b', allowed));
    for (const entry of ['*', 'Store', 'a/b/c', '/x', 'ns/', 'store_1']) {
      assert.throws(() => parseStoreSecretList(entry), new RegExp(`--allowed-store-secrets entry '${entry.replace('*', '\\*')}' is not a Secret name`), entry);
    }
    assert.throws(() => parseStoreSecretList(' , '), /--allowed-store-secrets is empty/);
    const refused = policyRefusal(
      samplePool({ store: { secretRef: { name: 'other-app', key: 'url' } } }),
      { allowedImages: ['reg.example/pglog'], allowedStoreSecrets: allowed },
      'reg.example/pglog:1',
    );
    assert.equal(refused?.reason, 'StoreSecretNotAllowed');
    assert.match(refused.message, /^spec\.store\.secretRef\.name other-app is not a store Secret this operator allows \(pglog-store, team-b\/store-b\)/);
  });
});
