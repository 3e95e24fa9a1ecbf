/**
 * Example objects, as a user (or, for shards, the operator) writes them: fields with defaults
 * left out. docs/resources.md shows them and the CRD integration test applies them, so a
 * documented example the API server rejects fails a test.
 */

export interface ResourceExample {
  readonly kind: string;
  /** One line on what the example shows. */
  readonly title: string;
  readonly object: Record<string, unknown>;
}

export const EXAMPLES: readonly ResourceExample[] = [
  {
    kind: 'PostgresTarget',
    title: 'A server with one instance in csvlog format and a Windows-1251 database, collected by the pool `main`',
    object: {
      apiVersion: 'pglog.io/v1alpha1',
      kind: 'PostgresTarget',
      metadata: { name: 'db1', labels: { env: 'prod' } },
      spec: {
        host: 'db1.example.com',
        user: 'postgres',
        ssh: { secretRef: { name: 'db1-ssh' } },
        pool: 'main',
        instances: [
          {
            name: 'main',
            dataDirectory: '/var/lib/postgresql/15/main',
            logFormat: 'csvlog',
            encodings: { databases: { legacy: 'WIN1251' } },
          },
        ],
        collect: { activity: true },
      },
    },
  },
  {
    kind: 'CollectorPool',
    title: 'Three collector pods writing to the store URL in the Secret `pglog-store`',
    object: {
      apiVersion: 'pglog.io/v1alpha1',
      kind: 'CollectorPool',
      metadata: { name: 'main' },
      spec: {
        replicas: 3,
        store: { secretRef: { name: 'pglog-store', key: 'url' } },
        transport: { promoteAboveBitsPerSecond: 2000000, demoteBelowBitsPerSecond: 1000000 },
        collector: { resources: { requests: { cpu: '500m', memory: '512Mi' }, limits: { memory: '1Gi' } } },
      },
    },
  },
  {
    kind: 'CollectorShard',
    title: 'Shard 0 of the pool `main` as the operator writes it (users do not create shards)',
    object: {
      apiVersion: 'pglog.io/v1alpha1',
      kind: 'CollectorShard',
      metadata: { name: 'main-0' },
      spec: {
        pool: 'main',
        index: 0,
        targets: [{ name: 'db1', transport: 'inproc', epoch: 1 }],
        targetCount: 1,
        tuning: { uvThreadpoolSize: 4, maxOldSpaceSizeMiB: 768, maxSemiSpaceSizeMiB: 16, heapGrowingPercent: 100 },
      },
    },
  },
];
