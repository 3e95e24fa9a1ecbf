// Sample CollectorPool, PostgresTarget and CollectorShard objects for the controller's tests.
import type { CollectorPool, CollectorPoolSpec } from '@pglog/common/api/collector-pool.ts';
import type { CollectorShard, ShardTarget } from '@pglog/common/api/collector-shard.ts';
import type { PostgresTarget, Transport } from '@pglog/common/api/postgres-target.ts';
import type { KubeObject } from '@pglog/common/kube/client-types.ts';

/** A CollectorPool's spec as the API server defaults it (crds/), all but the store it must name. */
export const POOL_SPEC_DEFAULTS: Omit<CollectorPoolSpec, 'store'> = {
  replicas: 1,
  sharding: { loadFactor: 1.25, minWeightBytesPerSecond: 1024 },
  transport: { promoteAboveBitsPerSecond: 1_250_000, demoteBelowBitsPerSecond: 750_000, minDwellSeconds: 60, proxyCapacityPerPod: 64 },
  collector: { imagePullPolicy: 'IfNotPresent' },
  sidecar: {},
  nodeTuning: { mode: 'auto' },
};

export function samplePool(overrides: Partial<CollectorPoolSpec> = {}, name = 'main'): CollectorPool {
  return {
    apiVersion: 'pglog.io/v1alpha1',
    kind: 'CollectorPool',
    metadata: { name, namespace: 'pglog', uid: '11111111-2222-3333-4444-555555555555', generation: 1 },
    spec: { ...POOL_SPEC_DEFAULTS, replicas: 3, store: { secretRef: { name: 'pglog-store', key: 'url' } }, ...overrides },
  };
}

export interface TargetFixture {
  name: string;
  pool?: string;
  transport?: Transport;
  labels?: Record<string, string>;
  bytesPerSecond?: number;
  instances?: number;
  sql?: boolean;
  namespace?: string;
}

export function sampleTarget(t: TargetFixture): PostgresTarget {
  return {
    apiVersion: 'pglog.io/v1alpha1',
    kind: 'PostgresTarget',
    metadata: { name: t.name, namespace: t.namespace ?? 'pglog', ...(t.labels === undefined ? {} : { labels: t.labels }) },
    spec: {
      host: `${t.name}.db.example`,
      port: 22,
      user: 'postgres',
      ssh: { secretRef: { name: `${t.name}-ssh` } },
      ...(t.pool === undefined ? {} : { pool: t.pool }),
      transport: t.transport ?? 'auto',
      instances: Array.from({ length: t.instances ?? 1 }, (_, i) => ({
        name: `i${i}`,
        dataDirectory: `/var/lib/postgresql/${i}`,
        logDirectory: `/var/lib/postgresql/${i}/log`,
        logFormat: 'stderr' as const,
        logLinePrefix: '%m [%p] ',
        encodings: { default: 'UTF8', databases: {} },
        sql: { socketDirectory: '/var/run/postgresql', port: 5432 + i, database: 'postgres', user: 'postgres', timeoutSeconds: 5, allowSuperuser: false },
      })),
      collect: { logs: true, activity: t.sql === true, locks: false, statements: false, databases: false, intervalSeconds: 15, statisticsIntervalSeconds: 15 },
    },
    ...(t.bytesPerSecond === undefined ? {} : { status: { rates: { bytesPerSecond: t.bytesPerSecond, linesPerSecond: t.bytesPerSecond / 100 } } }),
  };
}

export function sampleShard(
  pool: string,
  index: number,
  targets: ShardTarget[],
  reported: Array<{ name: string; bytesPerSecond: number; epoch?: number; transport?: 'inproc' | 'proxy' }> = [],
): CollectorShard {
  return {
    apiVersion: 'pglog.io/v1alpha1',
    kind: 'CollectorShard',
    metadata: { name: `${pool}-${index}`, namespace: 'pglog' },
    spec: { pool, index, targets, tuning: { uvThreadpoolSize: 4, maxOldSpaceSizeMiB: 512, maxSemiSpaceSizeMiB: 16 } },
    status: {
      targets: reported.map((r) => ({
        name: r.name,
        transport: r.transport ?? 'inproc',
        bytesPerSecond: r.bytesPerSecond,
        linesPerSecond: r.bytesPerSecond / 100,
        lagBytes: 0,
        connected: true,
        epoch: r.epoch ?? 1,
      })),
    },
  };
}

/** An informer cache stand-in for the reconcilers' tests: objects by namespace and name. */
export class Cache<T extends KubeObject> {
  readonly items = new Map<string, T>();
  get(namespace: string | undefined, name: string): T | undefined {
    return this.items.get(`${namespace ?? ''}/${name}`);
  }
  list(): T[] {
    return [...this.items.values()];
  }
  put(o: T): void {
    this.items.set(`${o.metadata.namespace ?? ''}/${o.metadata.name}`, o);
  }
}
