// A test-only custom metrics API (custom.metrics.k8s.io/v1beta2) behind a test control
// plane's aggregation layer:
//   - aggregatorCerts(): with the openssl CLI, a CA, the kube-apiserver's front-proxy client
//     certificate (the --requestheader-* and --proxy-client-* flags, returned as apiserverArgs
//     with --enable-aggregator-routing=true: there is no kube-proxy, the apiserver dials the
//     Service's endpoint address itself) and the metrics server's serving certificate for
//     <service>.<namespace>.svc, signed by the same CA (the APIService's caBundle);
//   - startCustomMetricsApi(): runs custom-metrics-server/serve.ts on a NetnsHost (a loopback
//     address may not be an endpoint), then creates a Service without a selector, its
//     Endpoints and EndpointSlice holding the namespace's address, and the APIService
//     v1beta2.custom.metrics.k8s.io, and waits until the APIService is Available. The values
//     it serves are what setPods() last wrote (a JSON file the server reads per request).
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { onProcessExit } from '@pglog/test-support/exit-cleanup.ts';
import { eventually } from '@pglog/test-support/fleet.ts';
import { createTestCa } from '@pglog/test-support/test-ca.ts';

import type { NetnsHost } from './netns.ts';

const SERVE = join(import.meta.dirname, 'custom-metrics-server', 'serve.ts');
export const CUSTOM_METRICS_APISERVICE = 'v1beta2.custom.metrics.k8s.io';

export interface AggregatorCerts {
  /** PEM of the CA that signed the serving certificate (the APIService's caBundle). */
  readonly caBundle: string;
  readonly servingCertFile: string;
  readonly servingKeyFile: string;
  /** kube-apiserver flags: the front proxy (request headers, client certificate) and aggregator routing. */
  readonly apiserverArgs: readonly string[];
  dispose(): void;
}

export async function aggregatorCerts(service: { namespace: string; name: string }, address: string): Promise<AggregatorCerts> {
  const dir = mkdtempSync(join(tmpdir(), 'pglog-aggregator-'));
  const forget = onProcessExit(() => rmSync(dir, { recursive: true, force: true }));
  const f = (name: string): string => join(dir, name);
  try {
    const ca = await createTestCa(dir, '/CN=pglog-test-aggregator-ca');
    const host = `${service.name}.${service.namespace}.svc`;
    await ca.issue('serving', `/CN=${host}`, `subjectAltName=DNS:${host},IP:${address}\nextendedKeyUsage=serverAuth\n`);
    await ca.issue('front-proxy-client', '/CN=front-proxy-client', 'extendedKeyUsage=clientAuth\n');
    return {
      caBundle: readFileSync(ca.certFile, 'utf8'),
      servingCertFile: f('serving.crt'),
      servingKeyFile: f('serving.key'),
      apiserverArgs: [
        `--requestheader-client-ca-file=${ca.certFile}`,
        '--requestheader-allowed-names=front-proxy-client',
        '--requestheader-username-headers=X-Remote-User',
        '--requestheader-group-headers=X-Remote-Group',
        '--requestheader-extra-headers-prefix=X-Remote-Extra-',
        `--proxy-client-cert-file=${f('front-proxy-client.crt')}`,
        `--proxy-client-key-file=${f('front-proxy-client.key')}`,
        '--enable-aggregator-routing=true',
      ],
      dispose() {
        rmSync(dir, { recursive: true, force: true });
        forget();
      },
    };
  } catch (e) {
    rmSync(dir, { recursive: true, force: true });
    forget();
    throw e;
  }
}

export interface MetricPod {
  namespace: string;
  name: string;
  labels: Record<string, string>;
  values: Record<string, number>;
}

export interface CustomMetricsApi {
  /** The endpoint the aggregator routes to (the network namespace's address and port). */
  readonly endpoint: string;
  /** What the server serves from now on. */
  setPods(pods: readonly MetricPod[]): void;
  /** The requests the server answered (`METHOD PATH STATUS ITEMS`). */
  requests(): string[];
  output(): string;
  /** Deletes the APIService, stops the server (the Service and endpoints go with their namespace or control plane). */
  stop(): Promise<void>;
}

export interface CustomMetricsApiOptions {
  host: NetnsHost;
  certs: AggregatorCerts;
  service: { namespace: string; name: string };
  /** The metric names it serves (for pods). */
  metrics: readonly string[];
  kubectl: (args: readonly string[], stdin?: string) => Promise<string>;
  /** Port inside the network namespace; default 6443. */
  port?: number;
}

export async function startCustomMetricsApi(options: CustomMetricsApiOptions): Promise<CustomMetricsApi> {
  const { host, certs, service, kubectl } = options;
  const port = options.port ?? 6443;
  const dir = mkdtempSync(join(tmpdir(), 'pglog-custom-metrics-'));
  const forget = onProcessExit(() => rmSync(dir, { recursive: true, force: true }));
  const stateFile = join(dir, 'state.json');
  const setPods = (pods: readonly MetricPod[]): void => {
    writeFileSync(`${stateFile}.tmp`, JSON.stringify({ metrics: options.metrics, pods }));
    renameSync(`${stateFile}.tmp`, stateFile);
  };
  setPods([]);
  let out = '';
  let child: ChildProcess | undefined;
  const stopChild = async (): Promise<void> => {
    if (child === undefined || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise<void>((r) => child!.once('exit', () => r()));
    child.kill('SIGTERM');
    const timer = setTimeout(() => child!.kill('SIGKILL'), 3000);
    await exited;
    clearTimeout(timer);
  };
  try {
    child = host.run(process.execPath, [SERVE, host.address, String(port), certs.servingCertFile, certs.servingKeyFile, stateFile]);
    const listening = new Promise<void>((resolve, reject) => {
      const onData = (b: Buffer): void => {
        out += b.toString();
        if (out.includes('listening ')) resolve();
      };
      child!.stdout!.on('data', onData);
      child!.stderr!.on('data', onData);
      child!.once('exit', (code, signal) => reject(new Error(`custom metrics server exited (${code ?? signal}):\n${out}`)));
    });
    listening.catch(() => undefined);
    await Promise.race([
      listening,
      new Promise((_, reject) => setTimeout(() => reject(new Error(`custom metrics server not listening after 15 s:\n${out}`)), 15_000).unref()),
    ]);

    const labels = { 'app.kubernetes.io/name': 'pglog-test-custom-metrics' };
    await kubectl(
      ['apply', '-f', '-'],
      JSON.stringify({
        apiVersion: 'v1',
        kind: 'List',
        items: [
          {
            apiVersion: 'v1',
            kind: 'Service',
            metadata: { ...service, labels },
            spec: { ports: [{ name: 'https', port: 443, targetPort: port, protocol: 'TCP' }] },
          },
          {
            // Not mirrored into a second slice: the EndpointSlice below is written directly.
            apiVersion: 'v1',
            kind: 'Endpoints',
            metadata: { ...service, labels: { ...labels, 'endpointslice.kubernetes.io/skip-mirror': 'true' } },
            subsets: [{ addresses: [{ ip: host.address }], ports: [{ name: 'https', port, protocol: 'TCP' }] }],
          },
          {
            apiVersion: 'discovery.k8s.io/v1',
            kind: 'EndpointSlice',
            metadata: {
              namespace: service.namespace,
              name: `${service.name}-netns`,
              labels: { ...labels, 'kubernetes.io/service-name': service.name, 'endpointslice.kubernetes.io/managed-by': 'pglog-test' },
            },
            addressType: 'IPv4',
            endpoints: [{ addresses: [host.address], conditions: { ready: true } }],
            ports: [{ name: 'https', port, protocol: 'TCP' }],
          },
          {
            apiVersion: 'apiregistration.k8s.io/v1',
            kind: 'APIService',
            metadata: { name: CUSTOM_METRICS_APISERVICE, labels },
            spec: {
              group: 'custom.metrics.k8s.io',
              version: 'v1beta2',
              groupPriorityMinimum: 100,
              versionPriority: 200,
              service: { ...service, port: 443 },
              caBundle: Buffer.from(certs.caBundle).toString('base64'),
            },
          },
        ],
      }),
    );
    let last = '';
    await eventually(
      `APIService ${CUSTOM_METRICS_APISERVICE} Available`,
      60_000,
      async () => {
        const o = JSON.parse(await kubectl(['get', 'apiservice', CUSTOM_METRICS_APISERVICE, '-o', 'json'])) as {
          status?: { conditions?: Array<{ type: string; status: string; message?: string }> };
        };
        const c = o.status?.conditions?.find((x) => x.type === 'Available');
        last = JSON.stringify(c);
        return c?.status === 'True' ? true : undefined;
      },
      () => `${last}\n${out.slice(-2000)}`,
    );
  } catch (e) {
    await stopChild();
    rmSync(dir, { recursive: true, force: true });
    forget();
    throw e;
  }
  let stopped = false;
  return {
    endpoint: `${host.address}:${port}`,
    setPods,
    requests: () =>
      out
        .split('\n')
        .filter((l) => l.startsWith('request '))
        .map((l) => l.slice(8)),
    output: () => out,
    async stop() {
      if (stopped) return;
      stopped = true;
      try {
        await kubectl(['delete', 'apiservice', CUSTOM_METRICS_APISERVICE, '--ignore-not-found', '--wait=false']);
      } catch {
        /* the control plane may be gone */
      }
      await stopChild();
      rmSync(dir, { recursive: true, force: true });
      forget();
    },
  };
}
