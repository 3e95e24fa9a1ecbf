/**
 * What a fleet on the real node is made of, as a user writes it (pure): a PostgresTarget per
 * simulated server and per real PostgreSQL server, all logging in with one SSH Secret; the
 * chart's values; the pool's patch (its size and the sidecar thresholds, which the chart has no
 * values for); and the collectors' memory limit, sized so that the operator's own tuning gives
 * each pod's heap what its streams need.
 */
import type { KubeObject } from '@pglog/common/kube/client-types.ts';
import { FLEET_LOG_LINE_PREFIX } from '@pglog/test-support/fleet-sim/log-files.ts';
import { promotionThreshold, type RateShape } from '@pglog/test-support/fleet-sim/rates.ts';
import { MONITOR_ROLE } from '@pglog/test-support/monitoring-role.ts';

import { autoOldSpaceMiB, autoSemiSpaceMiB } from '../../../src/desired/tuning.ts';

/** The fleet's addresses: made local on the host (a route to `lo`), reached by the pods through their gateway. */
export const FLEET_RANGE = '10.97.0.0/16';
export const FLEET_ADDRESS_BASE = '10.97';
export const FLEET_PORT = 2222;
/** The one SSH Secret of the fleet is `${SSH_SECRET_PREFIX}-ssh` (createSshSecret's naming). */
export const SSH_SECRET_PREFIX = 'fleet';
export const SSH_SECRET = `${SSH_SECRET_PREFIX}-ssh`;
export const STORE_SECRET = 'pglog-store';
export const POOL = 'main';
/** The share of the fleet's servers above the sidecar threshold: "a few percent". */
export const PROMOTED_SHARE = 0.05;

export interface ServerAddress {
  host: string;
  port: number;
}

/** The PostgresTarget of a simulated server: its one instance `main`, read from the oldest file. */
export function simulatedTargetObject(pool: string, name: string, server: ServerAddress, user: string, dataDirectory: string): KubeObject {
  return {
    apiVersion: 'pglog.io/v1alpha1',
    kind: 'PostgresTarget',
    metadata: { name },
    spec: {
      host: server.host,
      port: server.port,
      user,
      pool,
      transport: 'auto',
      startAt: 'oldest',
      ssh: { secretRef: { name: SSH_SECRET } },
      instances: [{ name: 'main', dataDirectory, logDirectory: 'log', logFormat: 'stderr', logLinePrefix: FLEET_LOG_LINE_PREFIX }],
    },
  } as KubeObject;
}

export interface RealInstance {
  dataDirectory: string;
  logDirectory: string;
  socketDir: string;
  port: number;
}

/** The PostgresTarget of a real PostgreSQL server behind a fleet sshd: its logs and SQL snapshots (activity, locks, databases). */
export function realTargetObject(pool: string, name: string, server: ServerAddress, user: string, pg: RealInstance): KubeObject {
  return {
    apiVersion: 'pglog.io/v1alpha1',
    kind: 'PostgresTarget',
    metadata: { name },
    spec: {
      host: server.host,
      port: server.port,
      user,
      pool,
      transport: 'auto',
      startAt: 'oldest',
      ssh: { secretRef: { name: SSH_SECRET } },
      collect: { logs: true, activity: true, locks: true, databases: true, intervalSeconds: 15, statisticsIntervalSeconds: 15 },
      instances: [
        {
          name: 'main',
          dataDirectory: pg.dataDirectory,
          logDirectory: pg.logDirectory,
          logLinePrefix: '%m [%p] %q%u@%d ',
          sql: { socketDirectory: pg.socketDir, port: pg.port, user: MONITOR_ROLE, database: 'postgres' },
        },
      ],
    },
  } as KubeObject;
}

/** The pool's sidecar thresholds: the hottest PROMOTED_SHARE of the shape's servers above, back below 60 % of it. */
export function fleetTransport(shape: RateShape): { promoteAboveBitsPerSecond: number; demoteBelowBitsPerSecond: number } {
  const promote = Math.round(promotionThreshold(shape, PROMOTED_SHARE) * 8);
  return { promoteAboveBitsPerSecond: promote, demoteBelowBitsPerSecond: Math.round(promote * 0.6) };
}

/** Share of the mean a shard may carry in targets (sharding bounds load, not count: a shard of quiet targets holds more). */
const TARGETS_PER_POD_MARGIN = 1.5;

/**
 * The collector container's memory limit (MiB, a multiple of 64) for `targets` log streams
 * over `pods` pods: the smallest under which the operator's tuning (autoOldSpaceMiB) gives the
 * fullest pod's old space what its streams need (the operator's own estimate: 128 MiB, 2 per
 * stream, 4 per SQL session, at least 256).
 */
export function collectorMemoryLimitMiB(targets: number, pods: number, sqlSessions = 0): number {
  const perPod = Math.ceil((targets / Math.max(1, pods)) * TARGETS_PER_POD_MARGIN);
  const semi = autoSemiSpaceMiB(0, null);
  const need = Math.max(256, Math.ceil((128 + 2 * perPod + 4 * sqlSessions) / 64) * 64);
  let limit = 256;
  while (autoOldSpaceMiB(limit * 2 ** 20, semi, perPod, sqlSessions) < need) limit += 64;
  return limit;
}

export interface ChartValuesInput {
  repository: string;
  tag: string;
  replicas: number;
  memoryLimitMiB: number;
  hpa: { min: number; max: number; targetSeconds: number } | null;
  storeCidr: string;
  storePort: number;
}

/** The chart's values: small CPU requests (many pods on a 2-core node), the memory limit, the HPA on a custom metric, policies naming the fleet's port. */
export function chartValues(v: ChartValuesInput): Record<string, unknown> {
  return {
    image: { repository: v.repository, tag: v.tag },
    operator: { replicas: 2, leaseDurationSeconds: 10, resyncSeconds: 30 },
    pool: {
      name: POOL,
      replicas: v.replicas,
      store: { secretName: STORE_SECRET, secretKey: 'url' },
      collector: { resources: { requests: { cpu: '50m', memory: '256Mi' }, limits: { memory: `${v.memoryLimitMiB}Mi` } } },
      sidecar: { resources: { requests: { cpu: '20m', memory: '64Mi' }, limits: { memory: '256Mi' } } },
    },
    hpa:
      v.hpa === null
        ? { enabled: false }
        : {
            enabled: true,
            minReplicas: v.hpa.min,
            maxReplicas: v.hpa.max,
            customMetric: { enabled: true, averageValue: `${Math.round(v.hpa.targetSeconds * 1000)}m` },
          },
    networkPolicy: { collector: { sshCIDRs: [FLEET_RANGE], sshPorts: [FLEET_PORT], storeCIDRs: [v.storeCidr], storePort: v.storePort } },
  };
}

/** The pool's spec as patched after the install: its size (the chart leaves it out under an HPA) and the sidecar thresholds. */
export function poolPatch(replicas: number, shape: RateShape): Record<string, unknown> {
  return { spec: { replicas, transport: fleetTransport(shape) } };
}
