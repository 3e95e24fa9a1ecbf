// A pool's collector pod as the kubelet would run it from the StatefulSet the operator wrote
// (there is no kubelet in the operator tier's tests): `pglog collect --shard <pool>-<index>`
// with PGLOG_STORE_URL read from the Secret key its container's secretKeyRef names, so a test
// runs each pool against the store its CollectorPool names (spec.store.secretRef).
import type { KubeClient, KubeObject } from '@pglog/common/kube/client-types.ts';
import { SECRETS, STATEFUL_SETS } from '@pglog/common/kube/resources.ts';
import { launchShardCollector, type ShardCollector } from '@pglog/test-support/shard-collector.ts';

interface StatefulSetLike extends KubeObject {
  spec: {
    template: { spec: { containers: Array<{ name: string; env?: Array<{ name: string; valueFrom?: { secretKeyRef?: { name: string; key: string } } }> }> } };
  };
}

/** The Secret key the pool's collector container takes PGLOG_STORE_URL from. */
export async function poolStoreRef(client: KubeClient, namespace: string, pool: string): Promise<{ name: string; key: string }> {
  const sts = await client.get<StatefulSetLike>(STATEFUL_SETS, namespace, pool);
  const container = sts?.spec.template.spec.containers.find((c) => c.name === 'collector');
  const ref = container?.env?.find((e) => e.name === 'PGLOG_STORE_URL')?.valueFrom?.secretKeyRef;
  if (ref === undefined) throw new Error(`StatefulSet ${namespace}/${pool}: no collector container with PGLOG_STORE_URL from a Secret`);
  return ref;
}

/** Starts pod `<pool>-<index>`'s collector with the store URL of the Secret its StatefulSet names. */
export async function startPoolPod(options: {
  client: KubeClient;
  kubeconfig: string;
  namespace: string;
  pool: string;
  index: number;
  dir: string;
}): Promise<ShardCollector> {
  const { client, namespace, pool } = options;
  const ref = await poolStoreRef(client, namespace, pool);
  const secret = await client.get<KubeObject & { data?: Record<string, string> }>(SECRETS, namespace, ref.name);
  const encoded = secret?.data?.[ref.key];
  if (encoded === undefined) throw new Error(`Secret ${namespace}/${ref.name} has no key ${ref.key}`);
  return launchShardCollector({
    shard: `${pool}-${options.index}`,
    kubeconfig: options.kubeconfig,
    namespace,
    storeUrl: Buffer.from(encoded, 'base64').toString('utf8'),
    dir: options.dir,
  });
}
