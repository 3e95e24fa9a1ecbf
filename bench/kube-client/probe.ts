/**
 * One child process of bench/kube-client-bench.ts (start-up and memory): imports ONE client's
 * kubeconfig loader, does one GET of a ConfigMap, and prints its own memory as JSON.
 *
 *   node --expose-gc bench/kube-client/probe.ts own|client-node|none KUBECONFIG NAMESPACE NAME
 *
 * Each client is imported dynamically so that the process loads nothing of the other; `none`
 * imports neither (the bare Node baseline) and skips the GET.
 */
const [which, kubeconfig, namespace, name] = process.argv.slice(2);
if (kubeconfig === undefined || namespace === undefined || name === undefined) {
  process.stderr.write('usage: probe.ts own|client-node|none KUBECONFIG NAMESPACE NAME\n');
  process.exit(2);
}

let got = '';
if (which === 'own') {
  const { loadKubeconfigFile } = await import('@pglog/common/kube/config.ts');
  const { createKubeClient } = await import('@pglog/common/kube/client.ts');
  const client = createKubeClient(await loadKubeconfigFile(kubeconfig));
  const cm = await client.get({ group: '', version: 'v1', plural: 'configmaps', kind: 'ConfigMap', namespaced: true }, namespace, name);
  got = cm?.metadata.name ?? '';
  client.close();
} else if (which === 'client-node') {
  const k8s = await import('@kubernetes/client-node');
  const kc = new k8s.KubeConfig();
  kc.loadFromFile(kubeconfig);
  const api = kc.makeApiClient(k8s.CoreV1Api);
  const cm = await api.readNamespacedConfigMap({ name, namespace });
  got = cm.metadata?.name ?? '';
} else if (which !== 'none') {
  process.stderr.write(`unknown client ${which}\n`);
  process.exit(2);
}
if (which !== 'none' && got !== name) throw new Error(`${which}: GET returned ${got || 'nothing'}, not ${name}`);
// RSS as the process stands; heap after a full collection, so garbage does not count.
const rss = process.memoryUsage().rss;
(globalThis as { gc?: () => void }).gc?.();
const { heapUsed } = process.memoryUsage();
process.stdout.write(`${JSON.stringify({ rss, heapUsed })}\n`);
process.exit(0);
