// The informer's pure cache logic on hand-made ConfigMaps: object keys, the events a relist
// emits against the cache (including the deletes a missed watch would have carried, and a
// recreated object by its new uid), and watch events applied with repeats ignored.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import type { KubeObject } from '@pglog/common/kube/client-types.ts';
import { applyWatchEvent, diffRelist, keyOf, objectKey } from '@pglog/common/kube/informer-cache.ts';

const obj = (name: string, rv: string, uid = `uid-${name}`, namespace = 'ns'): KubeObject => ({
  apiVersion: 'v1',
  kind: 'ConfigMap',
  metadata: { name, namespace, resourceVersion: rv, uid },
});

const cacheOf = (...items: KubeObject[]): Map<string, KubeObject> => new Map(items.map((i) => [keyOf(i), i]));
const summary = (events: { type: string; object: KubeObject; old?: KubeObject }[]): string[] =>
  events.map((e) => `${e.type} ${e.object.metadata.name}@${e.object.metadata.resourceVersion}${e.old ? ` (was ${e.old.metadata.resourceVersion})` : ''}`);

describe('informer cache', () => {
  test('keys: namespace/name, or the name alone for cluster-scoped objects', () => {
    assert.equal(objectKey('ns', 'a'), 'ns/a');
    assert.equal(objectKey(undefined, 'a'), 'a');
    assert.equal(keyOf({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'n1' } }), 'n1');
  });

  test('diffRelist: adds, updates with the old object, unchanged silent, deletes for what the list lacks', () => {
    const cache = cacheOf(obj('same', '1'), obj('changed', '2'), obj('gone', '3'));
    const { next, events } = diffRelist(cache, [obj('same', '1'), obj('changed', '5'), obj('new', '6')]);
    assert.deepEqual(summary(events), ['update changed@5 (was 2)', 'add new@6', 'delete gone@3 (was 3)']);
    assert.deepEqual([...next.keys()].sort(), ['ns/changed', 'ns/new', 'ns/same']);
    assert.equal(cache.size, 3, 'the old cache is not modified');
  });

  test('diffRelist: the same name with another uid was deleted and created again', () => {
    const { events } = diffRelist(cacheOf(obj('a', '1', 'old-uid')), [obj('a', '9', 'new-uid')]);
    assert.deepEqual(summary(events), ['delete a@1 (was 1)', 'add a@9']);
  });

  test('diffRelist of an empty list deletes everything; of the same items, nothing', () => {
    const items = [obj('a', '1'), obj('b', '2')];
    assert.deepEqual(summary(diffRelist(cacheOf(...items), []).events), ['delete a@1 (was 1)', 'delete b@2 (was 2)']);
    assert.deepEqual(diffRelist(cacheOf(...items), items).events, []);
  });

  test('applyWatchEvent: ADDED/MODIFIED upsert, DELETED removes, repeats and unknown deletes are silent', () => {
    const cache = new Map<string, KubeObject>();
    assert.deepEqual(summary([applyWatchEvent(cache, 'ADDED', obj('a', '1'))!]), ['add a@1']);
    assert.equal(applyWatchEvent(cache, 'ADDED', obj('a', '1')), undefined, 'same resourceVersion again');
    assert.deepEqual(summary([applyWatchEvent(cache, 'MODIFIED', obj('a', '2'))!]), ['update a@2 (was 1)']);
    assert.deepEqual(summary([applyWatchEvent(cache, 'MODIFIED', obj('b', '3'))!]), ['add b@3']);
    assert.deepEqual(summary([applyWatchEvent(cache, 'DELETED', obj('a', '4'))!]), ['delete a@4 (was 2)']);
    assert.equal(applyWatchEvent(cache, 'DELETED', obj('zz', '5')), undefined);
    assert.deepEqual([...cache.keys()], ['ns/b']);
  });
});
