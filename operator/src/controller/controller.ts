/**
 * The operator's controller while it leads: informers on pools, targets, shards and the owned
 * objects; events only enqueue a key (a pool, or a namespace's unassigned targets); workers take keys from the
 * de-duplicating queue and run the PoolReconciler in the generic loop of kube/controller-loop.ts
 * (per-key backoff, conflicts retried right away from fresh caches, outcome metrics).
 */
import type { CollectorPool } from '@pglog/common/api/collector-pool.ts';
import type { CollectorShard } from '@pglog/common/api/collector-shard.ts';
import type { TargetObject } from '@pglog/common/api/target-object.ts';
import type { KubeClient, KubeObject } from '@pglog/common/kube/client-types.ts';
import { runControllerLoop } from '@pglog/common/kube/controller-loop.ts';
import { Informer, stripManagedFields } from '@pglog/common/kube/informer.ts';
import { COLLECTOR_POOLS, COLLECTOR_SHARDS, POD_DISRUPTION_BUDGETS, POSTGRES_TARGETS, SERVICES, STATEFUL_SETS } from '@pglog/common/kube/resources.ts';
import { WorkQueue } from '@pglog/common/kube/workqueue.ts';
import type { Logger } from '@pglog/common/observability/logger.ts';

import type { PoolPolicy } from '../desired/pool-policy.ts';
import type { StatefulSetState } from '../desired/pool-status.ts';
import type { OperatorMetrics } from './operator-metrics.ts';
import type { EventSink } from './pool-pass.ts';
import { type PoolOutcome, PoolReconciler } from './pool-reconciler.ts';
import { reconcileUnassignedTargets } from './unassigned-targets.ts';

export interface ControllerOptions {
  client: KubeClient;
  /** Namespace to watch; undefined watches all. */
  namespace: string | undefined;
  events: EventSink;
  metrics: OperatorMetrics;
  log: Logger;
  defaultImage: string;
  serviceAccountName?: string;
  /** Allowed images and collector namespaces of pools. */
  policy: PoolPolicy;
  workers: number;
  /** Every pool is reconciled at least this often, whatever the events. */
  resyncMs: number;
}

/** Longest wait before a burst of target or shard-status events is reconciled. */
const COALESCE_MS = 1000;

/** Same generation (spec) and labels: only the status (or other metadata) moved. */
function onlyStatusChanged(old: KubeObject, next: KubeObject): boolean {
  return (
    old.metadata.generation !== undefined &&
    old.metadata.generation === next.metadata.generation &&
    JSON.stringify(old.metadata.labels ?? {}) === JSON.stringify(next.metadata.labels ?? {}) &&
    old.metadata.deletionTimestamp === next.metadata.deletionTimestamp
  );
}

/** Owned objects carry this label; their informers watch only those. */
const OWNED_SELECTOR = 'app.kubernetes.io/name=pglog,app.kubernetes.io/component=collector';
const FIELD_MANAGER = 'pglog-operator';

export class Controller {
  private readonly o: ControllerOptions;
  private readonly informers: Array<Informer<KubeObject>> = [];

  constructor(options: ControllerOptions) {
    this.o = options;
  }

  /** Whether every informer is synced and watching (readiness of the leader). */
  health(): { ok: boolean; reasons: string[] } {
    const reasons = this.informers.flatMap((i) => {
      const h = i.health();
      return h.ok ? [] : [h.reason];
    });
    return { ok: reasons.length === 0, reasons };
  }

  /** One informer per watched type, each remembered for health() and run(). */
  private createCaches(): Caches {
    const { o } = this;
    const logFor =
      (what: string) =>
      (level: string, msg: string, fields?: Record<string, unknown>): void => {
        const line = { informer: what, ...fields };
        if (level === 'error') o.log.error(line, msg);
        else if (level === 'warn') o.log.warn(line, msg);
        else o.log.debug(line, msg);
      };
    const informer = <T extends KubeObject>(type: typeof COLLECTOR_POOLS, labelSelector?: string): Informer<T> => {
      // Nothing reads managedFields, about half of a small object: 10,000 targets hold less memory.
      const i = new Informer<T>(o.client, type, { namespace: o.namespace, labelSelector, log: logFor(type.plural), transform: stripManagedFields });
      this.informers.push(i as unknown as Informer<KubeObject>);
      return i;
    };
    return {
      pools: informer<CollectorPool>(COLLECTOR_POOLS),
      targets: informer<TargetObject>(POSTGRES_TARGETS),
      shards: informer<CollectorShard>(COLLECTOR_SHARDS),
      statefulSets: informer<KubeObject & { status?: StatefulSetState }>(STATEFUL_SETS, OWNED_SELECTOR),
      services: informer<KubeObject>(SERVICES, OWNED_SELECTOR),
      pdbs: informer<KubeObject>(POD_DISRUPTION_BUDGETS, OWNED_SELECTOR),
    };
  }

  /** The unassigned targets of a namespace; skipped ones are looked at again soon. */
  private async unassigned(namespace: string, { pools, targets }: Caches): Promise<PoolOutcome> {
    const { writes, skipped } = await reconcileUnassignedTargets(namespace, { client: this.o.client, pools, targets, now: Date.now });
    return skipped > 0 ? { writes, requeueAfterMs: SKIPPED_RECHECK_MS } : { writes };
  }

  /** Runs until `signal` aborts (leadership lost or shutdown). */
  async run(signal: AbortSignal): Promise<void> {
    const { o } = this;
    const caches = this.createCaches();
    const { pools, targets, shards, statefulSets, services, pdbs } = caches;
    const queue = new WorkQueue();
    enqueueOnChange(caches, queue);

    const reconciler = new PoolReconciler({
      client: o.client,
      pools,
      targets,
      shards,
      statefulSets,
      services,
      podDisruptionBudgets: pdbs,
      events: o.events,
      metrics: o.metrics,
      defaultImage: o.defaultImage,
      serviceAccountName: o.serviceAccountName,
      policy: o.policy,
      fieldManager: FIELD_MANAGER,
      now: Date.now,
    });
    const running = this.informers.map((i) => i.run(signal));
    await waitForSync(this.informers, signal);
    if (signal.aborted) {
      queue.shutDown();
      await Promise.all(running);
      return;
    }
    o.log.info({ pools: pools.list().length, targets: targets.list().length, shards: shards.list().length }, 'caches synced; reconciling');
    const enqueueAll = (): void => {
      for (const p of pools.list()) queue.add(poolKey(p.metadata.namespace, p.metadata.name));
      for (const namespace of new Set(targets.list().map((t) => t.metadata.namespace))) queue.add(unassignedKey(namespace));
    };
    enqueueAll();
    const resync = setInterval(enqueueAll, o.resyncMs);
    signal.addEventListener(
      'abort',
      () => {
        clearInterval(resync);
        queue.shutDown();
      },
      { once: true },
    );

    await runControllerLoop<string>(
      {
        queue,
        workers: o.workers,
        log: o.log,
        controllerOf: (key) => parseKey(key).kind,
        reconciled: (controller, outcome, seconds, code) => o.metrics.reconciled(controller, outcome, seconds, code),
        queueDepth: (depth) => o.metrics.queue(depth),
        reconcile: async (key) => {
          const { kind, namespace, name } = parseKey(key);
          const outcome: PoolOutcome = kind === 'pool' ? await reconciler.reconcile(namespace, name) : await this.unassigned(namespace, caches);
          if (outcome.writes > 0) o.log.debug({ key, writes: outcome.writes }, 'reconciled');
          return outcome.requeueAfterMs === undefined ? {} : { requeueAfterMs: outcome.requeueAfterMs };
        },
      },
      signal,
    );
    await Promise.all(running);
  }
}

/** A target left alone because it changed after the pass looked is looked at again this soon. */
const SKIPPED_RECHECK_MS = 1000;

/** What the operator watches. */
export interface Caches {
  pools: Informer<CollectorPool>;
  targets: Informer<TargetObject>;
  shards: Informer<CollectorShard>;
  statefulSets: Informer<KubeObject & { status?: StatefulSetState }>;
  services: Informer<KubeObject>;
  pdbs: Informer<KubeObject>;
}

/** Which keys a change of each watched object queues. Exported for its unit test. */
export function enqueueOnChange({ pools, targets, shards, statefulSets, services, pdbs }: Caches, queue: WorkQueue): void {
  // Bursts (10,000 targets created, 100 collectors reporting) are coalesced into one
  // reconcile per key per COALESCE_MS: every pass reads the whole namespace anyway.
  const enqueueNamespace = (namespace: string | undefined): void => {
    for (const p of pools.list()) if (p.metadata.namespace === namespace) queue.addAfter(poolKey(namespace, p.metadata.name), COALESCE_MS);
    queue.addAfter(unassignedKey(namespace), COALESCE_MS);
  };
  pools.onChange((e) => {
    // The pool's own status, written at the end of a pass, needs no pass of its own (a status
    // someone else overwrote is repaired by the resync); spec, labels and deletion do.
    if (e.type === 'update' && e.old !== undefined && onlyStatusChanged(e.old, e.object)) return;
    queue.add(poolKey(e.object.metadata.namespace, e.object.metadata.name));
    // A new or deleted pool changes which targets are unassigned.
    if (e.type !== 'update') queue.add(unassignedKey(e.object.metadata.namespace));
  });
  // A target may join or leave any pool of its namespace (spec.pool, labels).
  // Status written by the operator itself changes nothing a reconcile reads for placement;
  // the periodic resync repairs a status someone else overwrote.
  targets.onChange((e) => {
    if (e.type === 'update' && e.old !== undefined && onlyStatusChanged(e.old, e.object)) return;
    enqueueNamespace(e.object.metadata.namespace);
  });
  shards.onChange((e) => {
    const key = poolKey(e.object.metadata.namespace, e.object.spec.pool);
    // A collector's report (status) waits for the next coalesced pass; a changed or deleted
    // assignment (spec) is repaired at once.
    if (e.type === 'update' && e.old !== undefined && onlyStatusChanged(e.old, e.object)) queue.addAfter(key, COALESCE_MS);
    else queue.add(key);
  });
  for (const owned of [statefulSets, services, pdbs]) {
    owned.onChange((e) => {
      const pool = e.object.metadata.labels?.['pglog.io/pool'];
      if (pool !== undefined) queue.add(poolKey(e.object.metadata.namespace, pool));
    });
  }
}

/**
 * Work queue keys: `pool/<namespace>/<name>` reconciles one pool, `unassigned/<namespace>`
 * the targets of a namespace that no pool selects.
 */
function poolKey(namespace: string | undefined, name: string): string {
  return `pool/${namespace ?? ''}/${name}`;
}

function unassignedKey(namespace: string | undefined): string {
  return `unassigned/${namespace ?? ''}`;
}

function parseKey(key: string): { kind: 'pool' | 'unassigned'; namespace: string; name: string } {
  const [kind, namespace = '', ...rest] = key.split('/');
  return { kind: kind === 'pool' ? 'pool' : 'unassigned', namespace, name: rest.join('/') };
}

async function waitForSync(informers: ReadonlyArray<Informer<KubeObject>>, signal: AbortSignal): Promise<void> {
  while (!signal.aborted && !informers.every((i) => i.hasSynced())) {
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}
