/**
 * The HPA of a fleet run, as a cluster with prometheus-adapter has it: the chart's HPA on the
 * collectors' event-loop delay (a Pods custom metric), served through the aggregation layer by
 * the test custom metrics API (../custom-metrics-server.ts, in a network namespace), fed every
 * two seconds with each collector pod's own value read from its /metrics (nothing made up).
 */
import type { KubeClient, KubeObject, ResourceType } from '@pglog/common/kube/client-types.ts';
import { COLLECTOR_POOLS, PODS } from '@pglog/common/kube/resources.ts';
import type { RealNodeOptions } from '@pglog/test-support/real-node.ts';

import { METRICS_PORT } from '../../../src/desired/pool-resources.ts';
import { type AggregatorCerts, aggregatorCerts, type CustomMetricsApi, type MetricPod, startCustomMetricsApi } from '../custom-metrics-server.ts';
import { createNetnsHost, type NetnsHost } from '../netns.ts';

export const HPA_METRIC = 'pglog_nodejs_eventloop_lag_p99_seconds';
export const HPAS: ResourceType = {
  group: 'autoscaling',
  version: 'v2',
  plural: 'horizontalpodautoscalers',
  kind: 'HorizontalPodAutoscaler',
  namespaced: true,
};

export interface Hpa extends KubeObject {
  spec: { minReplicas: number; maxReplicas: number };
  status?: { currentReplicas?: number; desiredReplicas?: number; currentMetrics?: Array<{ pods?: { current: { averageValue?: string } } }> };
}

export interface HpaMachinery {
  /** The real node's extra flags: the aggregation layer's, the HPA controller's sync period. */
  readonly nodeOptions: RealNodeOptions;
  /** After the cluster is up: the custom metrics API registered and fed. */
  start(kubectl: (args: readonly string[], stdin?: string) => Promise<string>, client: KubeClient, namespace: string, pool: string): Promise<void>;
  /** The values served last, `pod=seconds`. */
  served(): string[];
  stop(): Promise<void>;
}

/** The netns host and certificates now (the API server's flags need them), the server once the cluster runs. */
export async function prepareHpa(namespace: string): Promise<HpaMachinery> {
  const service = { namespace, name: 'pglog-fleet-custom-metrics' };
  const host: NetnsHost = createNetnsHost();
  let certs: AggregatorCerts;
  try {
    certs = await aggregatorCerts(service, host.address);
  } catch (e) {
    await host.dispose();
    throw e;
  }
  let api: CustomMetricsApi | undefined;
  let timer: NodeJS.Timeout | undefined;
  let busy: Promise<void> = Promise.resolve();
  let served: MetricPod[] = [];
  return {
    nodeOptions: { apiserverArgs: certs.apiserverArgs, controllerManagerArgs: ['--horizontal-pod-autoscaler-sync-period=5s'] },
    async start(kubectl, client, ns, pool) {
      api = await startCustomMetricsApi({ host, certs, service, metrics: [HPA_METRIC], kubectl });
      const feed = async (): Promise<void> => {
        const selector = (await client.get<KubeObject & { status?: { selector?: string } }>(COLLECTOR_POOLS, ns, pool))?.status?.selector;
        if (selector === undefined) return;
        const pods = (await client.list<KubeObject & { status?: { phase?: string; podIP?: string } }>(PODS, ns, { labelSelector: selector })).items;
        const next: MetricPod[] = [];
        await Promise.all(
          pods.map(async (p) => {
            if (p.status?.phase !== 'Running' || p.status.podIP === undefined) return;
            try {
              const text = await (await fetch(`http://${p.status.podIP}:${METRICS_PORT}/metrics`, { signal: AbortSignal.timeout(1500) })).text();
              const m = new RegExp(`^${HPA_METRIC}(?:\\{[^}]*\\})? (\\S+)$`, 'm').exec(text);
              if (m !== null) next.push({ namespace: ns, name: p.metadata.name, labels: p.metadata.labels ?? {}, values: { [HPA_METRIC]: Number(m[1]) } });
            } catch {
              /* not listening (yet) */
            }
          }),
        );
        served = next.sort((a, b) => a.name.localeCompare(b.name));
        api?.setPods(served);
      };
      timer = setInterval(() => {
        busy = busy.then(feed).catch(() => undefined);
      }, 2000);
    },
    served: () => served.map((p) => `${p.name}=${p.values[HPA_METRIC]}`),
    async stop() {
      if (timer !== undefined) clearInterval(timer);
      await busy;
      await Promise.allSettled([api?.stop()]);
      await host.dispose();
      certs.dispose();
    },
  };
}

/** The HPA's bounds moved (a scale step: its minimum raised, or put back). */
export async function setHpaBounds(client: KubeClient, namespace: string, name: string, min: number, max: number): Promise<void> {
  await client.mergePatch(HPAS, namespace, name, { spec: { minReplicas: min, maxReplicas: max } });
}
