/**
 * `pglog operator`: campaigns for the leader Lease; while it leads, runs the controller; when
 * it loses the Lease, stops the controller and campaigns again. Serves /metrics, /healthz and
 * /readyz throughout (a standby replica is ready: it is healthy and waiting).
 */
import type { OwnerReference } from '@pglog/common/api/common.ts';
import { PglogError } from '@pglog/common/errors.ts';
import type { KubeClient } from '@pglog/common/kube/client-types.ts';
import { EventRecorder } from '@pglog/common/kube/events.ts';
import { LeaderElector } from '@pglog/common/kube/leader-election.ts';
import { DEPLOYMENTS } from '@pglog/common/kube/resources.ts';
import { startHttpServer } from '@pglog/common/observability/http-server.ts';
import type { Logger } from '@pglog/common/observability/logger.ts';

import type { PoolPolicy } from '../desired/pool-policy.ts';
import { Controller } from './controller.ts';
import { OperatorMetrics } from './operator-metrics.ts';

export interface OperatorConfig {
  /** Namespace to watch; undefined: all namespaces. */
  namespace: string | undefined;
  leaseNamespace: string;
  leaseName: string;
  identity: string;
  leaseDurationMs: number;
  /** The operator's own Deployment in the Lease's namespace: the Lease's owner, so it goes with it. */
  leaseOwnerDeployment?: string;
  renewDeadlineMs: number;
  retryPeriodMs: number;
  defaultImage: string;
  serviceAccountName?: string;
  /** Allowed images (default: the repository of defaultImage) and collector namespaces of pools. */
  policy: PoolPolicy;
  workers: number;
  resyncMs: number;
  listen: { host: string; port: number };
}

/**
 * `leaseClient` renews the Lease: a client of its own (its own sockets), so that a renewal never
 * waits behind a burst of status writes and watches on `client`'s (issue 46: at 10,000 targets
 * on a busy machine the operator lost its Lease in the middle of its writes).
 */
export async function runOperator(
  config: OperatorConfig,
  client: KubeClient,
  log: Logger,
  signal: AbortSignal,
  leaseClient: KubeClient = client,
): Promise<void> {
  const metrics = new OperatorMetrics();
  const events = new EventRecorder(client, { component: 'pglog-operator', instance: config.identity });
  let controller: Controller | null = null;
  const http = await startHttpServer({
    host: config.listen.host,
    port: config.listen.port,
    metrics,
    log,
    ready: () => {
      if (signal.aborted) return { ready: false, reasons: ['stopping'] };
      if (controller === null) return { ready: true, reasons: ['standby: another replica leads'] };
      const h = controller.health();
      return { ready: h.ok, reasons: h.reasons };
    },
  });
  log.info({ listen: http.address, identity: config.identity }, `pglog operator listening on ${http.address.host}:${http.address.port}`);
  const elector = new LeaderElector(leaseClient, {
    namespace: config.leaseNamespace,
    name: config.leaseName,
    identity: config.identity,
    leaseDurationMs: config.leaseDurationMs,
    renewDeadlineMs: config.renewDeadlineMs,
    retryPeriodMs: config.retryPeriodMs,
    ...(config.leaseOwnerDeployment === undefined
      ? {}
      : { ownerReferences: () => deploymentOwner(client, config.leaseNamespace, config.leaseOwnerDeployment!) }),
    log: (level, msg, fields) => (level === 'error' || level === 'warn' ? log.warn(fields ?? {}, msg) : log.debug(fields ?? {}, msg)),
  });
  // One run per term of leadership; all are awaited before the process ends.
  const terms: Array<Promise<void>> = [];
  try {
    await elector.run(signal, {
      onStartedLeading: (leading) => {
        metrics.leader(true);
        log.info({ identity: config.identity }, `leading (Lease ${config.leaseNamespace}/${config.leaseName})`);
        const c = new Controller({
          client,
          namespace: config.namespace,
          events,
          metrics,
          log,
          defaultImage: config.defaultImage,
          serviceAccountName: config.serviceAccountName,
          policy: config.policy,
          workers: config.workers,
          resyncMs: config.resyncMs,
        });
        controller = c;
        terms.push(
          c
            .run(leading)
            .catch((e: unknown) => log.error({ err: e }, 'controller failed'))
            .finally(() => {
              if (controller === c) controller = null;
            }),
        );
      },
      onStoppedLeading: () => {
        metrics.leader(false);
        log.info({ identity: config.identity }, 'stopped leading');
      },
    });
  } finally {
    await Promise.all(terms);
    await http.close();
  }
}

/** An owner reference to a Deployment (not a controller: the Lease is not its workload). */
async function deploymentOwner(client: KubeClient, namespace: string, name: string): Promise<OwnerReference[] | undefined> {
  const deployment = await client.get(DEPLOYMENTS, namespace, name);
  if (deployment === null) throw new PglogError('KUBE_NOT_FOUND', `Deployment ${namespace}/${name} (--lease-owner-deployment) does not exist`);
  const uid = deployment.metadata.uid;
  return uid === undefined ? undefined : [{ apiVersion: 'apps/v1', kind: 'Deployment', name, uid }];
}
