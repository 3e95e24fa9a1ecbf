// HPA for real: the chart's HorizontalPodAutoscaler (autoscaling/v2, a Pods metric on the
// CollectorPool's scale subresource) driven by the real HPA controller of kube-controller-manager.
//   - The control plane runs with the aggregation layer configured (front-proxy client
//     certificate, request-header flags, --enable-aggregator-routing) and the HPA controller
//     syncing every 2 s;
//   - a test-only custom metrics API (helpers/custom-metrics-server.ts) runs on a test host in a
//     network namespace (helpers/netns.ts: veth pair, private 10.231.N.0/30) and is registered as
//     the APIService v1beta2.custom.metrics.k8s.io, whose Service's endpoint is that address;
//   - `helm install` of charts/pglog with hpa.enabled and hpa.customMetric.enabled (HPA min 2,
//     max 4, short scale-down stabilization) on the real node of helpers/real-node.ts: the
//     kubelet runs the operator and the pool's collector pods from the built image
//     (PGLOG_TEST_IMAGE), in a namespace that enforces Pod Security `restricted`, against a
//     store on the node's gateway address;
//   - every second the test reads each collector pod's real /metrics and hands the server
//     `pglog_nodejs_eventloop_lag_p99_seconds` per pod: the collector's own value (an idle
//     collector reads ~10 ms, far under the 500m target the test sets) or, while the test "heats"
//     the pool, a value the test controls (1.5 s: making real collectors' event loops lag by a chosen
//     amount on a shared CI machine is not reproducible).
// Asserted: the HPA's status shows the metric (ScalingActive, ValidMetricFound) with the
// pool at 2; with the metric above target the pool's spec.replicas becomes 4 through the scale
// subresource, the StatefulSet runs main-0..main-3 and there are 4 CollectorShards; with the
// metric back to the collectors' own values the pool shrinks to 2 with 2 shards.
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';

import type { KubeClient, KubeObject, ResourceType } from '@pglog/common/kube/client-types.ts';
import { COLLECTOR_POOLS, COLLECTOR_SHARDS, PODS, STATEFUL_SETS } from '@pglog/common/kube/resources.ts';
import type { ControlPlane } from '@pglog/test-support/control-plane.ts';
import { type E2eCluster, POD_SECURITY_WARNING, startE2eCluster } from '@pglog/test-support/e2e-cluster.ts';
import { eventually } from '@pglog/test-support/fleet.ts';
import { startPostgres, type TestPostgres } from '@pglog/test-support/postgres.ts';

import { METRICS_PORT } from '../../src/desired/pool-resources.ts';
import { type AggregatorCerts, aggregatorCerts, type CustomMetricsApi, type MetricPod, startCustomMetricsApi } from '../helpers/custom-metrics-server.ts';
import { createNetnsHost, type NetnsHost } from '../helpers/netns.ts';

const NS = 'pglog';
const POOL = 'main';
const METRIC = 'pglog_nodejs_eventloop_lag_p99_seconds';
const HOT_SECONDS = 1.5;
/** The HPA's target (hpa.customMetric.averageValue below). */
const TARGET_SECONDS = 0.5;
const CHART = join(import.meta.dirname, '../../../charts/pglog');
const SERVICE = { namespace: NS, name: 'pglog-test-custom-metrics' };
const HPAS: ResourceType = { group: 'autoscaling', version: 'v2', plural: 'horizontalpodautoscalers', kind: 'HorizontalPodAutoscaler', namespaced: true };

interface Hpa extends KubeObject {
  spec: { minReplicas: number; maxReplicas: number; metrics: unknown[] };
  status?: {
    currentReplicas?: number;
    desiredReplicas?: number;
    currentMetrics?: Array<{ type: string; pods?: { metric: { name: string }; current: { averageValue?: string } } }>;
    conditions?: Array<{ type: string; status: string; reason?: string; message?: string }>;
  };
}
interface Pool extends KubeObject {
  spec: { replicas: number };
  status?: { replicas?: number; selector?: string };
}
interface PodObject extends KubeObject {
  status?: { phase?: string; podIP?: string };
}

/** A Kubernetes quantity as a number (100m -> 0.1). */
function quantityValue(q: string): number {
  const m = /^(-?[\d.]+)([numkMG])?$/.exec(q);
  if (m === null) throw new Error(`quantity ${q}`);
  const scale: Record<string, number> = { n: 1e-9, u: 1e-6, m: 1e-3, k: 1e3, M: 1e6, G: 1e9 };
  return Number(m[1]) * (m[2] === undefined ? 1 : scale[m[2]]!);
}

describe("HPA for real: the chart's HPA scales the pool from a custom metric served through the aggregation layer", { timeout: 600_000 }, () => {
  let host: NetnsHost | undefined;
  let certs: AggregatorCerts | undefined;
  let cp: ControlPlane | undefined;
  let store: TestPostgres | undefined;
  let client: KubeClient & { close(): void };
  let cluster: E2eCluster | undefined;
  let metrics: CustomMetricsApi | undefined;
  let feeding: NodeJS.Timeout | undefined;
  let feedBusy: Promise<void> = Promise.resolve();
  let hot = false;
  let served: MetricPod[] = [];
  const realValues = new Map<string, number>();
  const started = Date.now();
  const elapsed = (): string => `${((Date.now() - started) / 1000).toFixed(1)} s`;
  let lastState = '';
  /** The HPA's readings as they change: `<at> <averageValue>-><desiredReplicas>`. */
  const readings: string[] = [];

  /** Pods of the pool's selector (status.selector, as the HPA reads it) with their metric: real, or HOT_SECONDS while hot. */
  const feed = async (): Promise<void> => {
    const pool = await client.get<Pool>(COLLECTOR_POOLS, NS, POOL);
    const selector = pool?.status?.selector;
    if (selector === undefined) return;
    const pods = (await client.list<PodObject>(PODS, NS, { labelSelector: selector })).items;
    const next: MetricPod[] = [];
    await Promise.all(
      pods.map(async (p) => {
        if (p.status?.phase !== 'Running' || p.status.podIP === undefined) return;
        let real: number | undefined;
        try {
          const text = await (await fetch(`http://${p.status.podIP}:${METRICS_PORT}/metrics`, { signal: AbortSignal.timeout(1500) })).text();
          const m = new RegExp(`^${METRIC}(?:\\{[^}]*\\})? (\\S+)$`, 'm').exec(text);
          if (m !== null) real = Number(m[1]);
        } catch {
          /* not listening yet */
        }
        if (real !== undefined) realValues.set(p.metadata.name, real);
        const value = hot ? HOT_SECONDS : real;
        if (value !== undefined) next.push({ namespace: NS, name: p.metadata.name, labels: p.metadata.labels ?? {}, values: { [METRIC]: value } });
      }),
    );
    served = next.sort((a, b) => a.name.localeCompare(b.name));
    metrics!.setPods(served);
  };

  /** The HPA, the pool, the StatefulSet, shards and pods; `lastState` for failure messages. */
  async function observe(): Promise<{ hpa: Hpa; pool: Pool; stsReplicas: number | undefined; shards: string[]; pods: string[] }> {
    const [hpa, pool, sts, shards, pods] = await Promise.all([
      client.get<Hpa>(HPAS, NS, POOL),
      client.get<Pool>(COLLECTOR_POOLS, NS, POOL),
      client.get<KubeObject & { spec: { replicas: number } }>(STATEFUL_SETS, NS, POOL),
      client.list<KubeObject & { spec: { pool: string } }>(COLLECTOR_SHARDS, NS),
      client.list<PodObject>(PODS, NS, { labelSelector: `pglog.io/pool=${POOL}` }),
    ]);
    const reading = `${hpa?.status?.currentMetrics?.find((x) => x.type === 'Pods')?.pods?.current.averageValue ?? '-'}->${hpa?.status?.desiredReplicas ?? '-'}`;
    if (readings.at(-1)?.endsWith(reading) !== true) readings.push(`${elapsed()} ${reading}`);
    const view = {
      hpa: hpa!,
      pool: pool!,
      stsReplicas: sts?.spec.replicas,
      shards: shards.items
        .filter((s) => s.spec.pool === POOL)
        .map((s) => s.metadata.name)
        .sort(),
      pods: pods.items
        .filter((p) => p.status?.phase === 'Running' && p.metadata.deletionTimestamp === undefined)
        .map((p) => p.metadata.name)
        .sort(),
    };
    lastState = JSON.stringify(
      {
        at: elapsed(),
        hot,
        served: served.map((p) => `${p.name}=${p.values[METRIC]}`),
        hpa: { status: hpa?.status },
        pool: { replicas: pool?.spec.replicas, status: pool?.status },
        statefulSet: view.stsReplicas,
        shards: view.shards,
        runningPods: view.pods,
        metricsRequests: metrics?.requests().slice(-3),
      },
      null,
      1,
    );
    return view;
  }

  const scenario = (fn: () => Promise<void>) => async (): Promise<void> => {
    try {
      await fn();
    } catch (e) {
      process.stderr.write(
        `# failed at ${elapsed()}; last state:\n${lastState}\n--- custom metrics server\n${metrics?.output().slice(-3000) ?? ''}\n--- control plane\n${
          cp
            ?.logs()
            .split('\n')
            .filter((l) => /horizontal|hpa|custom\.metrics|aggregat|apiservice/i.test(l))
            .slice(-40)
            .join('\n') ?? ''
        }\n`,
      );
      throw e;
    }
  };

  /** Until the pool, the StatefulSet, the running pods and the shards all are `n`. */
  const poolAt = (n: number) => async (): Promise<true | undefined> => {
    const v = await observe();
    const names = Array.from({ length: n }, (_, i) => `${POOL}-${i}`).join();
    return v.pool.spec.replicas === n && v.pool.status?.replicas === n && v.stsReplicas === n && v.pods.join() === names && v.shards.join() === names
      ? true
      : undefined;
  };

  before(async () => {
    host = createNetnsHost();
    certs = await aggregatorCerts(SERVICE, host.address);
    cluster = await startE2eCluster({
      namespace: NS,
      image: process.env['PGLOG_TEST_IMAGE'],
      docker: process.env['PGLOG_TEST_DOCKER'] ?? 'docker',
      node: {
        apiserverArgs: certs.apiserverArgs,
        controllerManagerArgs: ['--horizontal-pod-autoscaler-sync-period=2s', '--horizontal-pod-autoscaler-downscale-stabilization=5s'],
      },
    });
    cp = cluster.cp;
    client = cluster.client;
    const net = cluster.node.network;
    // The collectors' store, where their pods reach it: the node's gateway.
    store = await startPostgres({ tcp: { address: net.gateway, clientRange: net.podRange }, settings: ['max_connections = 100'] });
    await cluster.kubectl(['create', 'secret', 'generic', 'pglog-store', `--from-literal=url=${store.tcpUrl!}`]);
    metrics = await startCustomMetricsApi({ host, certs, service: SERVICE, metrics: [METRIC], kubectl: (args, stdin) => cp!.kubectl(args, stdin) });
    console.log(`# APIService Available (endpoint ${metrics.endpoint} in network namespace ${host.name}) at ${elapsed()}`);
    const values = join(cluster.work, 'values.json');
    writeFileSync(
      values,
      JSON.stringify({
        image: { repository: cluster.repository, tag: cluster.tag },
        operator: { replicas: 1, leaseDurationSeconds: 5, resyncSeconds: 10 },
        // Small requests: 4 collector pods fit a 2-core node.
        pool: { name: POOL, replicas: 2, collector: { resources: { requests: { cpu: '100m', memory: '192Mi' }, limits: { memory: '384Mi' } } } },
        hpa: {
          enabled: true,
          minReplicas: 2,
          maxReplicas: 4,
          // A target far above an idle collector's p99 (~10-20 ms), so a busy CI machine cannot
          // scale the pool before the test heats it.
          customMetric: { enabled: true, averageValue: '500m' },
          // Scale down within seconds (the chart's default waits 5 minutes).
          behavior: { scaleDown: { stabilizationWindowSeconds: 4, policies: [{ type: 'Pods', value: 2, periodSeconds: 2 }] } },
        },
      }),
    );
    const { stderr } = await cluster.helm(['install', 'pglog', CHART, '-f', values]);
    assert.doesNotMatch(stderr, POD_SECURITY_WARNING);
    const tick = (): void => {
      feedBusy = feedBusy.then(feed).catch(() => undefined);
    };
    feeding = setInterval(tick, 1000);
    console.log(`# set up (netns, certificates, real node, APIService, helm install) in ${elapsed()}`);
  });

  after(async () => {
    if (feeding !== undefined) clearInterval(feeding);
    await feedBusy;
    await Promise.allSettled([metrics?.stop()]);
    await cluster?.stop();
    await Promise.allSettled([store?.stop(), host?.dispose()]);
    certs?.dispose();
  });

  test(
    "at rest: the HPA reads the collectors' metric through the aggregation layer with the pool at 2",
    scenario(async () => {
      await eventually('the pool at 2 (pods, shards)', 90_000, poolAt(2), () => lastState);
      const hpa = await eventually(
        'the HPA showing the metric',
        60_000,
        async () => {
          const { hpa } = await observe();
          const m = hpa.status?.currentMetrics?.find((x) => x.type === 'Pods');
          const active = hpa.status?.conditions?.find((c) => c.type === 'ScalingActive');
          return m?.pods?.metric.name === METRIC && m.pods.current.averageValue !== undefined && active?.status === 'True' ? hpa : undefined;
        },
        () => lastState,
      );
      const m = hpa.status!.currentMetrics!.find((x) => x.type === 'Pods')!;
      assert.deepEqual(
        hpa.spec.metrics,
        [{ type: 'Pods', pods: { metric: { name: METRIC }, target: { type: 'AverageValue', averageValue: '500m' } } }],
        "the chart's HPA with the test's target",
      );
      assert.equal(hpa.status!.conditions!.find((c) => c.type === 'ScalingActive')?.reason, 'ValidMetricFound');
      // A real reading: the collectors' event-loop p99 (an idle collector reads ~10 ms; the histogram's resolution is 10 ms).
      assert.ok(quantityValue(m.pods!.current.averageValue!) > 0, `a measured value: ${m.pods!.current.averageValue}`);
      assert.equal(hpa.status!.currentReplicas, 2);
      assert.ok(
        metrics!.requests().some((r) => r.startsWith(`GET /apis/custom.metrics.k8s.io/v1beta2/namespaces/${NS}/pods/*/${METRIC}?`) && / 200 [1-9]\d*$/.test(r)),
        `the aggregator routed the HPA's request to the server in the network namespace: ${metrics!.requests().slice(-5).join('; ')}`,
      );
      console.log(`# HPA reads ${m.pods!.current.averageValue} (real: ${[...realValues].map(([k, v]) => `${k}=${v}`).join(' ')}) at ${elapsed()}`);
    }),
  );

  test(
    'metric above target: the HPA scales the pool to 4 through the scale subresource; 4 pods, 4 shards',
    scenario(async () => {
      assert.equal((await observe()).pool.spec.replicas, 2, lastState);
      const t0 = Date.now();
      hot = true;
      await eventually('the pool at 4 (pods, shards)', 60_000, poolAt(4), () => lastState);
      const hpa = await eventually(
        `the HPA reading ${HOT_SECONDS * 1000}m`,
        30_000,
        async () => {
          const { hpa } = await observe();
          const v = hpa.status?.currentMetrics?.find((x) => x.type === 'Pods')?.pods?.current.averageValue;
          return v !== undefined && Math.abs(quantityValue(v) - HOT_SECONDS) < 1e-6 && hpa.status?.currentReplicas === 4 ? hpa : undefined;
        },
        () => lastState,
      );
      assert.equal(hpa.status?.desiredReplicas, 4);
      const rescaled = hpa.status?.conditions?.find((c) => c.type === 'AbleToScale');
      assert.equal(rescaled?.status, 'True', lastState);
      console.log(`# 2 -> 4 in ${((Date.now() - t0) / 1000).toFixed(1)} s (at ${elapsed()})`);
    }),
  );

  test(
    'metric back under target: the pool shrinks to 2; 2 pods, 2 shards',
    scenario(async () => {
      const t0 = Date.now();
      hot = false;
      await eventually(
        "the HPA reading the collectors' own values again",
        30_000,
        async () => {
          const { hpa } = await observe();
          const v = hpa.status?.currentMetrics?.find((x) => x.type === 'Pods')?.pods?.current.averageValue;
          return v !== undefined && quantityValue(v) < TARGET_SECONDS ? true : undefined;
        },
        () => lastState,
      );
      await eventually('the pool at 2 (pods, shards)', 60_000, poolAt(2), () => `${lastState}\nHPA readings: ${readings.join(', ')}`);
      const { hpa } = await observe();
      assert.equal(hpa.status?.desiredReplicas, 2);
      console.log(
        `# 4 -> 2 in ${((Date.now() - t0) / 1000).toFixed(1)} s (at ${elapsed()}); the server answered ${metrics!.requests().length} requests; HPA readings: ${readings.join(', ')}`,
      );
    }),
  );
});
