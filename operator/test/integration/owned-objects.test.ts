// The writes of a pool's owned objects on a real kube-apiserver (security review R8, ADR 0031):
//   - a Service someone created after the read that found none: the create answers 409, the
//     pool reports it and their Service is left as it was (a server-side apply would have taken
//     it over: its selector and a controller owner reference, so the pool's deletion deletes it);
//   - a created object ends owned by the operator's apply alone, so a field a later version
//     stops applying is removed (a POST's own field manager entry would keep it);
//   - an object replaced since it was read is not applied over: KUBE_CONFLICT, read again.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import type { KubeObject } from '@pglog/common/kube/client-types.ts';
import { isKubeError } from '@pglog/common/kube/errors.ts';
import { SERVICES } from '@pglog/common/kube/resources.ts';

import { applyOwned, createOwned } from '../../src/controller/owned-objects.ts';
import { desiredHeadlessService } from '../../src/desired/pool-resources.ts';
import { samplePool } from '../helpers/pool-fixtures.ts';
import { useSharedKube } from '../helpers/shared-control-plane.ts';

/** This file's namespace on the shared control plane (shared-control-plane.ts). */
const NS = 'owned-objects';
const APPLY = { fieldManager: 'pglog-operator', force: true };

type Service = KubeObject & {
  metadata: { managedFields?: Array<{ manager: string; operation: string; subresource?: string }> };
  spec: { selector?: Record<string, string>; publishNotReadyAddresses?: boolean; ports: Array<{ name: string; port: number }> };
};

/**
 * The headless Service of pool `name` in this file's namespace, as the operator wants it, but
 * without its owner reference: there is no such pool here, and the garbage collector would
 * delete what it owns.
 */
function poolService(name: string): Service {
  const pool = samplePool({ replicas: 1 }, name);
  const service = desiredHeadlessService({ ...pool, metadata: { ...pool.metadata, namespace: NS } }) as Service;
  const { ownerReferences: _none, ...metadata } = service.metadata;
  return { ...service, metadata };
}

describe('owned objects on a real kube-apiserver: create with POST, apply only what was read', { timeout: 240_000 }, () => {
  const kube = useSharedKube(NS, { userAgent: 'pglog-operator' });

  test("a Service created by someone else after the read: the create's 409 is a conflict, their Service is untouched", async () => {
    const desired = poolService('app');
    const theirs = await kube.client.create<Service>(SERVICES, {
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name: desired.metadata.name, namespace: NS },
      spec: { selector: { app: 'postgres' }, ports: [{ name: 'metrics', port: 9187 }] },
    });
    // The pass read no such Service a moment ago; now it writes.
    assert.equal(await createOwned(kube.client, SERVICES, desired, APPLY), 'conflict');
    const now = (await kube.client.get<Service>(SERVICES, NS, desired.metadata.name))!;
    assert.equal(now.metadata.resourceVersion, theirs.metadata.resourceVersion, 'not written at all');
    assert.deepEqual(now.spec.selector, { app: 'postgres' });
    assert.equal(now.metadata.ownerReferences, undefined);
  });

  test("a created Service is owned by the operator's apply alone: a field no longer applied is removed", async () => {
    const desired = poolService('fresh');
    const name = desired.metadata.name;
    assert.equal(await createOwned(kube.client, SERVICES, desired, APPLY), 'created');
    const created = (await kube.client.get<Service>(SERVICES, NS, name))!;
    assert.deepEqual(
      (created.metadata.managedFields ?? []).map((m) => `${m.manager} ${m.operation}`),
      ['pglog-operator Apply'],
      'no Update entry of the create',
    );
    assert.ok(desired.spec.publishNotReadyAddresses, 'the desired headless Service sets publishNotReadyAddresses');
    const { publishNotReadyAddresses: _dropped, ...spec } = desired.spec;
    await applyOwned(kube.client, SERVICES, { ...desired, spec }, created, APPLY);
    const after = (await kube.client.get<Service>(SERVICES, NS, name))!;
    assert.equal(after.spec.publishNotReadyAddresses, undefined, 'removed: no other manager owns it');
  });

  test('a Service deleted and created again by someone else since it was read: KUBE_CONFLICT, theirs untouched', async () => {
    const desired = poolService('swapped');
    const name = desired.metadata.name;
    assert.equal(await createOwned(kube.client, SERVICES, desired, APPLY), 'created');
    const read = (await kube.client.get<Service>(SERVICES, NS, name))!;
    await kube.client.delete(SERVICES, NS, name);
    const theirs = await kube.client.create<Service>(SERVICES, {
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name, namespace: NS },
      spec: { selector: { app: 'other' }, ports: [{ name: 'http', port: 80 }] },
    });
    await assert.rejects(
      applyOwned(kube.client, SERVICES, desired, read, { ...APPLY, reapply: true }),
      (e: unknown) => isKubeError(e, 'KUBE_CONFLICT') && /was replaced since it was read/.test(e.message),
    );
    const now = (await kube.client.get<Service>(SERVICES, NS, name))!;
    assert.equal(now.metadata.resourceVersion, theirs.metadata.resourceVersion, 'not written at all');
    await kube.client.delete(SERVICES, NS, name);
    await assert.rejects(
      applyOwned(kube.client, SERVICES, desired, read, { ...APPLY, reapply: true }),
      (e: unknown) => isKubeError(e, 'KUBE_CONFLICT'),
      'deleted: not created again by the apply either',
    );
    assert.equal(await kube.client.get(SERVICES, NS, name), null);
  });
});
