/**
 * The desired workload objects of one CollectorPool: a StatefulSet whose pod <i> collects
 * shard `<pool>-<i>`, the headless Service that gives the pods stable names and exposes their
 * metrics port, and a PodDisruptionBudget. Pure: the same pool gives the same objects.
 *
 * The StatefulSet depends only on the pool's container settings (images, resources, store
 * Secret) and replicas, never on the assignment, transports or tuning: those live in the
 * CollectorShard specs, which the collector watches. So a rebalance or a tuning change never
 * makes the StatefulSet controller roll the pods.
 */
import type { CollectorPool } from '@pglog/common/api/collector-pool.ts';
import type { LabelSelector, OwnerReference, ResourceRequirements } from '@pglog/common/api/common.ts';
import { PglogError } from '@pglog/common/errors.ts';
import type { KubeObject } from '@pglog/common/kube/client-types.ts';
import { STATUS_FILE as SIDECAR_STATUS_FILE } from '@pglog/common/sidecar/contract.ts';

import type { Container, PodDisruptionBudget, PodSecurityContext, SecurityContext, Service, StatefulSet, Volume } from './workload-types.ts';

/** The shared in-memory directory of the collector and its sidecar (FIFOs, keys, desired/status files). */
export const SSHPROXY_DIR = '/run/pglog/sshproxy';
/** Port of the collector's /metrics, /healthz and /readyz (the collector's default `--listen` port). */
export const METRICS_PORT = 9187;
export const METRICS_PORT_NAME = 'http-metrics';
/** The container's user and group: the conventional non-root id of distroless images. */
export const POD_USER_ID = 65532;
/**
 * How long the collector has to flush after SIGTERM (`--stop-timeout`): the last batch of
 * every stream is committed with its offsets, so the next owner resumes without a gap. A
 * full batch (16 MiB by default) commits in well under a second on a healthy store; 20 s
 * leaves room for a slow one and for retries.
 */
export const COLLECTOR_STOP_TIMEOUT_MS = 20_000;
/** The kubelet's SIGKILL comes this long after SIGTERM: the flush time plus a margin for process exit. */
export const TERMINATION_GRACE_SECONDS = 30;

/**
 * Defaults when the pool leaves resources out. The collector's memory limit sizes its V8 heap
 * (tuning.ts); 1 GiB holds the default store budget (20 MiB of encoded batches), socket buffers and a
 * heap of ~640 MiB. The sidecar holds no log bytes (ssh writes straight into the FIFOs), only
 * a small Node.js heap and the ssh processes' memory.
 */
export const DEFAULT_COLLECTOR_RESOURCES: ResourceRequirements = Object.freeze({
  requests: { cpu: '250m', memory: '512Mi' },
  limits: { memory: '1Gi' },
});
export const DEFAULT_SIDECAR_RESOURCES: ResourceRequirements = Object.freeze({
  requests: { cpu: '50m', memory: '64Mi' },
  limits: { memory: '256Mi' },
});
/** The shared directory holds keys and small JSON files; FIFOs take no space. It counts against the pod's memory. */
const SSHPROXY_DIR_SIZE = '32Mi';
/** Where client libraries (and `pglog collect`'s in-cluster access) look for the service account's token, CA and namespace. */
export const SERVICE_ACCOUNT_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';
/** The volume holding them; mounted into the collector container only. */
export const SERVICE_ACCOUNT_VOLUME = 'kube-api-access';
/** The kubelet refreshes the token at 80 % of this; an hour is what it uses for automounted tokens. */
const TOKEN_EXPIRATION_SECONDS = 3607;
const TMP_DIR_SIZE = '64Mi';
/** The sidecar's scratch space: ssh and a small Node.js process, no compile cache worth keeping. */
const SIDECAR_TMP_DIR_SIZE = '16Mi';

export interface StatefulSetOptions {
  /** Image used when the pool names none: the operator's own image. */
  defaultImage: string;
  /** Service account of the pods (RBAC to read the shard and its targets' Secrets). */
  serviceAccountName?: string;
}

/** Labels of every object of the pool and of its pods. */
export function poolLabels(pool: CollectorPool): Record<string, string> {
  return {
    'app.kubernetes.io/name': 'pglog',
    'app.kubernetes.io/component': 'collector',
    'app.kubernetes.io/instance': pool.metadata.name,
    'pglog.io/pool': pool.metadata.name,
  };
}

/** The pods' label selector as `status.selector` holds it (the scale subresource and an HPA read it). */
export function poolSelector(pool: CollectorPool): string {
  return Object.entries(poolLabels(pool))
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([k, v]) => `${k}=${v}`)
    .join(',');
}

/**
 * The owner reference that makes `owner` the controller of an object (garbage collection
 * deletes it with the owner). `owner` must have been read from the API (it has a uid); one
 * without throws KUBE_INVALID, as the API server would refuse the reference.
 */
export function ownerReference(owner: KubeObject): OwnerReference {
  const uid = owner.metadata.uid;
  if (uid === undefined || uid === '') {
    throw new PglogError('KUBE_INVALID', `${owner.kind} ${owner.metadata.name} has no metadata.uid: an owner must be read from the API server`);
  }
  return {
    apiVersion: owner.apiVersion,
    kind: owner.kind,
    name: owner.metadata.name,
    uid,
    controller: true,
    blockOwnerDeletion: true,
  };
}

/** Name of the pool's headless Service (the StatefulSet's `serviceName`). */
export function headlessServiceName(pool: CollectorPool): string {
  return `${pool.metadata.name}-metrics`;
}

function ownedMetadata(pool: CollectorPool, name: string): StatefulSet['metadata'] {
  return {
    name,
    ...(pool.metadata.namespace === undefined ? {} : { namespace: pool.metadata.namespace }),
    labels: poolLabels(pool),
    // A pool read from the API always has a uid; one rendered offline (a dry run) gets no owner.
    ...(pool.metadata.uid === undefined ? {} : { ownerReferences: [ownerReference(pool)] }),
  };
}

/** Pod Security `restricted`: non-root, no privilege escalation, no capabilities, the runtime's seccomp profile. */
const POD_SECURITY: PodSecurityContext = {
  runAsNonRoot: true,
  runAsUser: POD_USER_ID,
  runAsGroup: POD_USER_ID,
  // The emptyDir volumes become group-owned by it, so both containers can write them.
  fsGroup: POD_USER_ID,
  seccompProfile: { type: 'RuntimeDefault' },
};
const CONTAINER_SECURITY: SecurityContext = {
  runAsNonRoot: true,
  allowPrivilegeEscalation: false,
  readOnlyRootFilesystem: true,
  capabilities: { drop: ['ALL'] },
};

/** The one volume both containers mount: the FIFOs, keys and desired/status files it exists for. */
const SHARED_MOUNT = { name: 'sshproxy', mountPath: SSHPROXY_DIR };
/**
 * Each container's own /tmp, which the image makes HOME. Never shared: Node's resolver tries
 * $HOME/.node_modules for a bare require that misses and pglog keeps its compile cache under
 * $HOME/.cache, so a /tmp the sidecar could write would let it plant code that the collector,
 * the container holding the API token and the store URL, loads.
 */
const COLLECTOR_TMP = { name: 'tmp', mountPath: '/tmp' };
const SIDECAR_TMP = { name: 'sidecar-tmp', mountPath: '/tmp' };

function resourcesOr(given: ResourceRequirements | undefined, fallback: ResourceRequirements): ResourceRequirements {
  const source = given !== undefined && (given.limits !== undefined || given.requests !== undefined) ? given : fallback;
  return {
    ...(source.requests === undefined ? {} : { requests: { ...source.requests } }),
    ...(source.limits === undefined ? {} : { limits: { ...source.limits } }),
  };
}

/** The collector container's resources: the pool's, or the defaults (the tuning reads the memory limit from here too). */
export function collectorResources(pool: CollectorPool): ResourceRequirements {
  return resourcesOr(pool.spec.collector.resources, DEFAULT_COLLECTOR_RESOURCES);
}

function collectorContainer(pool: CollectorPool, image: string): Container {
  return {
    name: 'collector',
    image,
    imagePullPolicy: pool.spec.collector.imagePullPolicy,
    command: ['pglog'],
    args: [
      'collect',
      // The pod's name is the shard's name (`<pool>-<i>`): pod i collects shard i.
      '--shard',
      '$(POD_NAME)',
      '--namespace',
      '$(POD_NAMESPACE)',
      // Probes and Prometheus reach the pod's IP, not its loopback.
      '--listen',
      `0.0.0.0:${METRICS_PORT}`,
      '--sshproxy',
      'external',
      '--sshproxy-dir',
      SSHPROXY_DIR,
      '--stop-timeout',
      String(COLLECTOR_STOP_TIMEOUT_MS),
    ],
    env: [
      { name: 'POD_NAME', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } },
      { name: 'POD_NAMESPACE', valueFrom: { fieldRef: { fieldPath: 'metadata.namespace' } } },
      // Read by `pglog collect` when no --store is given: keeps the password out of the pod spec and the process list.
      { name: 'PGLOG_STORE_URL', valueFrom: { secretKeyRef: { name: pool.spec.store.secretRef.name, key: pool.spec.store.secretRef.key } } },
    ],
    ports: [{ name: METRICS_PORT_NAME, containerPort: METRICS_PORT, protocol: 'TCP' }],
    // /readyz fails while assigned targets are not collecting: the pod leaves the Service, the process stays.
    readinessProbe: { httpGet: { path: '/readyz', port: METRICS_PORT_NAME }, periodSeconds: 10, timeoutSeconds: 5, failureThreshold: 3 },
    // Liveness waits for start-up (store migration, first claims) however long it takes, up to
    // two minutes, instead of guessing an initial delay.
    startupProbe: { httpGet: { path: '/healthz', port: METRICS_PORT_NAME }, periodSeconds: 2, timeoutSeconds: 5, failureThreshold: 60 },
    // /healthz fails only when the process is wedged; a restart resumes from committed offsets.
    livenessProbe: { httpGet: { path: '/healthz', port: METRICS_PORT_NAME }, periodSeconds: 20, timeoutSeconds: 5, failureThreshold: 6 },
    resources: collectorResources(pool),
    securityContext: { ...CONTAINER_SECURITY, capabilities: { drop: ['ALL'] } },
    volumeMounts: [{ ...SHARED_MOUNT }, { ...COLLECTOR_TMP }, { name: SERVICE_ACCOUNT_VOLUME, mountPath: SERVICE_ACCOUNT_DIR, readOnly: true }],
  };
}

/**
 * The service account's token, the cluster's CA and the namespace, as the kubelet's automount
 * would project them, but as a volume of our own so that only the collector container mounts
 * it: the sidecar, the container that talks to remote servers, has no API credentials.
 */
function serviceAccountVolume(): Volume {
  return {
    name: SERVICE_ACCOUNT_VOLUME,
    projected: {
      defaultMode: 0o444,
      sources: [
        { serviceAccountToken: { path: 'token', expirationSeconds: TOKEN_EXPIRATION_SECONDS } },
        { configMap: { name: 'kube-root-ca.crt', items: [{ key: 'ca.crt', path: 'ca.crt' }] } },
        { downwardAPI: { items: [{ path: 'namespace', fieldRef: { apiVersion: 'v1', fieldPath: 'metadata.namespace' } }] } },
      ],
    },
  };
}

/**
 * The sidecar runs as a native sidecar (an init container with `restartPolicy: Always`): it
 * starts before the collector and, on pod termination, is stopped only after the collector
 * exits, so proxied streams keep running while the collector flushes.
 */
function sidecarContainer(pool: CollectorPool, image: string): Container {
  return {
    name: 'sshproxy',
    image,
    imagePullPolicy: pool.spec.collector.imagePullPolicy,
    restartPolicy: 'Always',
    command: ['pglog'],
    args: ['sshproxy', '--dir', SSHPROXY_DIR],
    // A native sidecar counts as started once its startup probe passes, and only then does the
    // kubelet start the collector: the sidecar has prepared the shared directory and written
    // its first status (the collector would otherwise find neither and wait for them).
    startupProbe: { exec: { command: ['test', '-s', `${SSHPROXY_DIR}/${SIDECAR_STATUS_FILE}`] }, periodSeconds: 1, timeoutSeconds: 5, failureThreshold: 120 },
    resources: resourcesOr(pool.spec.sidecar.resources, DEFAULT_SIDECAR_RESOURCES),
    securityContext: { ...CONTAINER_SECURITY, capabilities: { drop: ['ALL'] } },
    volumeMounts: [{ ...SHARED_MOUNT }, { ...SIDECAR_TMP }],
  };
}

/** The pool's StatefulSet: `replicas` pods, pod <i> collecting shard `<pool>-<i>`. */
export function desiredStatefulSet(pool: CollectorPool, options: StatefulSetOptions): StatefulSet {
  const labels = poolLabels(pool);
  const collectorImage = pool.spec.collector.image ?? options.defaultImage;
  const sidecarImage = pool.spec.sidecar.image ?? collectorImage;
  const selector: LabelSelector = { matchLabels: { ...labels } };
  return {
    apiVersion: 'apps/v1',
    kind: 'StatefulSet',
    metadata: ownedMetadata(pool, pool.metadata.name),
    spec: {
      replicas: pool.spec.replicas,
      serviceName: headlessServiceName(pool),
      // Pods are independent shards: start and replace them all at once, not one after another.
      podManagementPolicy: 'Parallel',
      selector,
      updateStrategy: { type: 'RollingUpdate' },
      template: {
        metadata: { labels: { ...labels } },
        spec: {
          ...(options.serviceAccountName === undefined ? {} : { serviceAccountName: options.serviceAccountName }),
          // The collector watches its CollectorShard and reads its targets and their Secrets;
          // its token comes from the projected volume it alone mounts (serviceAccountVolume).
          automountServiceAccountToken: false,
          terminationGracePeriodSeconds: TERMINATION_GRACE_SECONDS,
          // A pool's namespace may hold many Services; their variables are of no use to pglog.
          enableServiceLinks: false,
          securityContext: { ...POD_SECURITY, seccompProfile: { type: 'RuntimeDefault' } },
          initContainers: [sidecarContainer(pool, sidecarImage)],
          containers: [collectorContainer(pool, collectorImage)],
          volumes: [
            // Memory-backed: private keys never touch a node's disk, and FIFOs need a local filesystem.
            { name: 'sshproxy', emptyDir: { medium: 'Memory', sizeLimit: SSHPROXY_DIR_SIZE } },
            // The root filesystem is read-only; Node.js and ssh may need a scratch directory, one per container.
            { name: COLLECTOR_TMP.name, emptyDir: { sizeLimit: TMP_DIR_SIZE } },
            { name: SIDECAR_TMP.name, emptyDir: { sizeLimit: SIDECAR_TMP_DIR_SIZE } },
            serviceAccountVolume(),
          ],
        },
      },
    },
  };
}

/** Headless Service `<pool>-metrics`: stable pod DNS names for the StatefulSet and a scrape target for Prometheus. */
export function desiredHeadlessService(pool: CollectorPool): Service {
  return {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: ownedMetadata(pool, headlessServiceName(pool)),
    spec: {
      clusterIP: 'None',
      selector: poolLabels(pool),
      // Metrics of a pod that is not ready (a failing target) are what one wants to see.
      publishNotReadyAddresses: true,
      ports: [{ name: METRICS_PORT_NAME, port: METRICS_PORT, targetPort: METRICS_PORT_NAME, protocol: 'TCP' }],
    },
  };
}

/** At most one pod of the pool down for a voluntary disruption (drain): its shard waits, the others keep collecting. */
export function desiredPodDisruptionBudget(pool: CollectorPool): PodDisruptionBudget {
  return {
    apiVersion: 'policy/v1',
    kind: 'PodDisruptionBudget',
    metadata: ownedMetadata(pool, pool.metadata.name),
    spec: {
      maxUnavailable: 1,
      selector: { matchLabels: poolLabels(pool) },
    },
  };
}
