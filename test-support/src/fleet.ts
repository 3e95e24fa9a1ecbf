// Test fixtures: pools and targets as users would write them, created in bulk through the
// real client (1,000 objects through kubectl apply would take longer than the test itself).
import type { CollectorShard } from '@pglog/common/api/collector-shard.ts';
import type { KubeClient } from '@pglog/common/kube/client-types.ts';
import type { KubeObject } from '@pglog/common/kube/client-types.ts';
import { COLLECTOR_POOLS, COLLECTOR_SHARDS, POSTGRES_TARGETS } from '@pglog/common/kube/resources.ts';

export function poolObject(
  namespace: string,
  name: string,
  replicas: number,
  extra: Record<string, unknown> = {},
): KubeObject & { spec: Record<string, unknown> } {
  return {
    apiVersion: 'pglog.io/v1alpha1',
    kind: 'CollectorPool',
    metadata: { name, namespace },
    spec: { replicas, store: { secretRef: { name: 'store', key: 'url' } }, ...extra },
  };
}

export function targetObject(
  namespace: string,
  name: string,
  pool: string,
  transport: 'auto' | 'inproc' | 'proxy' = 'auto',
): KubeObject & { spec: Record<string, unknown> } {
  return {
    apiVersion: 'pglog.io/v1alpha1',
    kind: 'PostgresTarget',
    metadata: { name, namespace },
    spec: {
      host: `10.0.${Math.floor(Number(name.replace(/\D/g, '') || 0) / 250) % 250}.${(Number(name.replace(/\D/g, '') || 0) % 250) + 1}`,
      user: 'postgres',
      pool,
      transport,
      ssh: { secretRef: { name: 'ssh' } },
      instances: [{ name: 'main', dataDirectory: '/var/lib/postgresql/15/main' }],
    },
  };
}

export async function createAll(client: KubeClient, objects: readonly KubeObject[], concurrency = 32): Promise<void> {
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < objects.length) {
      const o = objects[next++]!;
      await client.create(o.kind === 'CollectorPool' ? COLLECTOR_POOLS : POSTGRES_TARGETS, o);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
}

/** Target name → shard index, from the pool's CollectorShards. */
export async function assignmentOf(
  client: KubeClient,
  namespace: string,
  pool: string,
): Promise<{ shards: CollectorShard[]; byTarget: Map<string, number>; duplicates: string[] }> {
  const { items } = await client.list<CollectorShard>(COLLECTOR_SHARDS, namespace);
  const shards = items.filter((s) => s.spec.pool === pool).sort((a, b) => a.spec.index - b.spec.index);
  const byTarget = new Map<string, number>();
  const duplicates: string[] = [];
  for (const s of shards) {
    for (const t of s.spec.targets) {
      if (byTarget.has(t.name)) duplicates.push(t.name);
      byTarget.set(t.name, s.spec.index);
    }
  }
  return { shards, byTarget, duplicates };
}

/** Polls `check` until it returns a value (not undefined) or the time is up. */
export async function eventually<T>(what: string, timeoutMs: number, check: () => Promise<T | undefined>, describe?: () => string): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const value = await check();
      if (value !== undefined) return value;
    } catch (e) {
      last = e;
    }
    if (Date.now() > deadline) {
      throw new Error(
        `${what}: not within ${timeoutMs} ms${last === undefined ? '' : ` (last error: ${last instanceof Error ? last.message : JSON.stringify(last)})`}${describe === undefined ? '' : `\n${describe()}`}`,
      );
    }
    await new Promise((r) => setTimeout(r, 200));
  }
}
