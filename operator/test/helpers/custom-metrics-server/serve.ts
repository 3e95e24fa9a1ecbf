// A test-only custom metrics API server (custom.metrics.k8s.io/v1beta2), run by
// custom-metrics-server.ts inside a network namespace:
//   node serve.ts ADDRESS PORT CERT_FILE KEY_FILE STATE_FILE
// HTTPS with the given serving certificate (the APIService's caBundle signs it). It serves
//   - /apis/custom.metrics.k8s.io/v1beta2: the resource list (one `pods/<metric>` per metric);
//   - /apis/custom.metrics.k8s.io/v1beta2/namespaces/NS/pods/NAME|*/METRIC?labelSelector=...:
//     a MetricValueList of the pods in STATE_FILE that match (equality-based selectors only);
//   - /healthz, /readyz: ok; anything else 404 (the aggregator then falls back from
//     aggregated discovery to the group-version's resource list).
// STATE_FILE is JSON written by the test and read on every request:
//   { "metrics": ["name"], "pods": [{ "namespace", "name", "labels": {}, "values": { "name": seconds } }] }
// Each request is logged as one line `request METHOD PATH STATUS ITEMS` on stdout.
import { readFileSync } from 'node:fs';
import { createServer } from 'node:https';

interface StatePod {
  namespace: string;
  name: string;
  labels: Record<string, string>;
  values: Record<string, number>;
}
interface State {
  metrics: string[];
  pods: StatePod[];
}

const [address, port, certFile, keyFile, stateFile] = process.argv.slice(2);
if (stateFile === undefined) throw new Error('usage: serve.ts ADDRESS PORT CERT KEY STATE');
const GV = 'custom.metrics.k8s.io/v1beta2';

function state(): State {
  try {
    return JSON.parse(readFileSync(stateFile!, 'utf8')) as State;
  } catch {
    return { metrics: [], pods: [] };
  }
}

/** `a=b,c!=d` (what an HPA sends for matchLabels); undefined when it uses set-based terms. */
function parseSelector(text: string): Array<{ key: string; equal: boolean; value: string }> | undefined {
  if (text.trim() === '') return [];
  const terms = [];
  for (const part of text.split(',')) {
    const m = /^([\w./-]+)\s*(==|=|!=)\s*([\w.-]*)$/.exec(part.trim());
    if (m === null) return undefined;
    terms.push({ key: m[1]!, equal: m[2] !== '!=', value: m[3]! });
  }
  return terms;
}

/** Seconds as a Kubernetes quantity in micro units (0.0102 -> 10200u). */
const quantity = (seconds: number): string => `${Math.round(seconds * 1e6)}u`;

const server = createServer({ cert: readFileSync(certFile!), key: readFileSync(keyFile!) }, (req, res) => {
  const url = new URL(req.url ?? '/', 'https://x');
  const send = (status: number, body: unknown, items = 0): void => {
    res.writeHead(status, { 'content-type': 'application/json' });
    res.end(JSON.stringify(body));
    process.stdout.write(`request ${req.method} ${decodeURIComponent(url.pathname)}${url.search} ${status} ${items}\n`);
  };
  const status = (code: number, message: string): void => send(code, { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message, code });
  if (url.pathname === '/healthz' || url.pathname === '/readyz' || url.pathname === '/livez') {
    send(200, 'ok');
    return;
  }
  const s = state();
  if (url.pathname === `/apis/${GV}`) {
    send(200, {
      kind: 'APIResourceList',
      apiVersion: 'v1',
      groupVersion: GV,
      resources: s.metrics.map((m) => ({ name: `pods/${m}`, singularName: '', namespaced: true, kind: 'MetricValueList', verbs: ['get'] })),
    });
    return;
  }
  const m = new RegExp(`^/apis/${GV.replace('.', '\\.')}/namespaces/([^/]+)/pods/([^/]+)/([^/]+)$`).exec(url.pathname);
  if (m === null) {
    status(404, `not found: ${url.pathname}`);
    return;
  }
  const [namespace, name, metric] = m.slice(1).map((x) => decodeURIComponent(x)) as [string, string, string];
  if (!s.metrics.includes(metric)) {
    status(404, `metric ${metric} is not served`);
    return;
  }
  const selector = parseSelector(url.searchParams.get('labelSelector') ?? '');
  if (selector === undefined) {
    status(400, 'only equality-based label selectors are supported');
    return;
  }
  const now = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
  const items = s.pods
    .filter((p) => p.namespace === namespace && (name === '*' || p.name === name) && p.values[metric] !== undefined)
    .filter((p) => selector.every((t) => (p.labels[t.key] === t.value) === t.equal))
    .map((p) => ({
      describedObject: { kind: 'Pod', namespace, name: p.name, apiVersion: '/v1' },
      metric: { name: metric },
      timestamp: now,
      windowSeconds: 1,
      value: quantity(p.values[metric]!),
    }));
  if (name !== '*' && items.length === 0) {
    status(404, `no ${metric} for pod ${namespace}/${name}`);
    return;
  }
  send(200, { kind: 'MetricValueList', apiVersion: GV, metadata: {}, items }, items.length);
});
server.listen(Number(port), address, () => process.stdout.write(`listening ${address}:${port}\n`));
process.on('SIGTERM', () => {
  server.close();
  server.closeAllConnections();
});
