// What the node agent makes of a pod's spec before it runs anything: the container's
// environment (value, fieldRef, secretKeyRef, configMapKeyRef), `$(VAR)` expansion, and the
// test-only mappings that let a pod run as local processes on a shared host:
//   - a volume's mountPath is rewritten to its host directory wherever it occurs in args and
//     env values (the process sees host paths; nothing is mounted);
//   - `0.0.0.0:` in args becomes the pod's own loopback address (`<podIP>:`);
//   - `pglog` runs collector/bin/pglog, `node` this Node.js; `pglog collect`, `pglog crds` and `pglog
//     operator` get `--kubeconfig FILE` (the pod's service account token from the TokenRequest
//     API) in place of the in-cluster service account files, but only in a container that
//     has a token: every container when the pod automounts it, else only those that mount a
//     projected volume with a serviceAccountToken source (hasToken).
import type { KubeClient, KubeObject, ResourceType } from '../../../src/kube/client-types.ts';
import type { Container, EnvVar as WorkloadEnvVar } from '../../../src/controller/workload-types.ts';
import { SECRETS } from '../../../src/kube/resources.ts';
import { PGLOG } from '../../../../collector/test/helpers/cli.ts';

export const CONFIG_MAPS: ResourceType = { group: '', version: 'v1', plural: 'configmaps', kind: 'ConfigMap', namespaced: true };

export interface EnvVar extends WorkloadEnvVar {
  valueFrom?: NonNullable<WorkloadEnvVar['valueFrom']> & { configMapKeyRef?: { name: string; key: string; optional?: boolean } };
}

export interface PodContainer extends Omit<Container, 'env' | 'image'> {
  image?: string;
  env?: EnvVar[];
}

export interface Pod extends KubeObject {
  metadata: KubeObject['metadata'] & { deletionGracePeriodSeconds?: number };
  spec: {
    nodeName?: string;
    schedulerName?: string;
    serviceAccountName?: string;
    automountServiceAccountToken?: boolean;
    restartPolicy?: 'Always' | 'OnFailure' | 'Never';
    terminationGracePeriodSeconds?: number;
    initContainers?: PodContainer[];
    containers: PodContainer[];
    volumes?: Array<{ name: string; emptyDir?: Record<string, unknown>; configMap?: { name: string }; projected?: { sources: Array<{ serviceAccountToken?: { path: string } }> } }>;
  };
  status?: { podIP?: string; phase?: string };
}

/** A native sidecar: an init container with `restartPolicy: Always`. */
export function isSidecar(c: PodContainer): boolean {
  return c.restartPolicy === 'Always';
}

/** `$(VAR)` from `vars`; `$$(VAR)` is a literal `$(VAR)`; an unknown variable stays as written (the kubelet's rules). */
export function expand(text: string, vars: ReadonlyMap<string, string>): string {
  return text.replace(/\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)/g, (match, name: string | undefined) => {
    if (name === undefined) return '$';
    return vars.get(name) ?? match;
  });
}

/** Replaces each mountPath where it stands as a whole path or a path prefix, in one pass (a host directory is never mapped again). */
export function mapMounts(text: string, mounts: ReadonlyMap<string, string>): string {
  if (mounts.size === 0) return text;
  const paths = [...mounts.keys()].sort((a, b) => b.length - a.length).map((p) => p.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'));
  const pattern = new RegExp(`(^|[^\\w./-])(${paths.join('|')})(?=$|[/\\s:,;="'])`, 'g');
  return text.replace(pattern, (_m, before: string, path: string) => `${before}${mounts.get(path)!}`);
}

async function keyOf(client: KubeClient, type: ResourceType, namespace: string, ref: { name: string; key: string; optional?: boolean }): Promise<string | undefined> {
  const o = await client.get<KubeObject & { data?: Record<string, string> }>(type, namespace, ref.name);
  const raw = o?.data?.[ref.key];
  if (raw === undefined) {
    if (ref.optional === true) return undefined;
    throw new Error(`${type.kind} ${namespace}/${ref.name} has no key ${ref.key}`);
  }
  return type === SECRETS ? Buffer.from(raw, 'base64').toString('utf8') : raw;
}

/** The container's environment in order, each value expanded with the variables before it. */
export async function containerEnv(client: KubeClient, pod: Pod, podIP: string, c: PodContainer, mounts: ReadonlyMap<string, string>): Promise<Map<string, string>> {
  const vars = new Map<string, string>();
  const namespace = pod.metadata.namespace ?? 'default';
  for (const e of c.env ?? []) {
    let value: string | undefined;
    const from = e.valueFrom;
    if (from?.fieldRef !== undefined) {
      const fields: Record<string, string> = {
        'metadata.name': pod.metadata.name, 'metadata.namespace': namespace, 'metadata.uid': pod.metadata.uid ?? '',
        'status.podIP': podIP, 'spec.nodeName': pod.spec.nodeName ?? '', 'spec.serviceAccountName': pod.spec.serviceAccountName ?? 'default',
      };
      value = fields[from.fieldRef.fieldPath];
      if (value === undefined) throw new Error(`fieldRef ${from.fieldRef.fieldPath} is not supported by the test node agent`);
    } else if (from?.secretKeyRef !== undefined) {
      value = await keyOf(client, SECRETS, namespace, from.secretKeyRef);
    } else if (from?.configMapKeyRef !== undefined) {
      value = await keyOf(client, CONFIG_MAPS, namespace, from.configMapKeyRef);
    } else {
      value = mapMounts(expand(e.value ?? '', vars), mounts);
    }
    if (value !== undefined) vars.set(e.name, value);
  }
  return vars;
}

/** Whether the container gets the service account's token, as the kubelet would give it. */
export function hasToken(pod: Pod, c: PodContainer): boolean {
  if (pod.spec.automountServiceAccountToken !== false) return true;
  const tokenVolumes = new Set((pod.spec.volumes ?? []).filter((v) => v.projected?.sources.some((s) => s.serviceAccountToken !== undefined) === true).map((v) => v.name));
  return (c.volumeMounts ?? []).some((m) => tokenVolumes.has(m.name));
}

/**
 * The argv a container runs: command + args expanded and mapped, `pglog` and `node` resolved.
 * `kubeconfig` is undefined for a container without a token: it gets no API access.
 */
export function containerArgv(c: PodContainer, vars: ReadonlyMap<string, string>, mounts: ReadonlyMap<string, string>, podIP: string, kubeconfig: string | undefined): string[] {
  const words = [...(c.command ?? []), ...(c.args ?? [])].map((w) => mapMounts(expand(w, vars), mounts).replaceAll('0.0.0.0:', `${podIP}:`));
  if (words.length === 0) throw new Error(`container ${c.name}: no command (an image's entry point means nothing to the test node agent)`);
  if (words[0] === 'pglog') {
    words[0] = PGLOG;
    if (kubeconfig !== undefined && (words[1] === 'collect' || words[1] === 'operator' || words[1] === 'crds') && !words.some((w) => w === '--kubeconfig' || w.startsWith('--kubeconfig='))) words.push('--kubeconfig', kubeconfig);
  } else if (words[0] === 'node') {
    words[0] = process.execPath;
  }
  return words;
}

/** A kubeconfig for the pod: the agent's server and CA, the pod's service account token. */
export function podKubeconfig(server: string, caCert: string | undefined, tlsServerName: string | undefined, token: string, namespace: string): string {
  return JSON.stringify({
    apiVersion: 'v1', kind: 'Config', 'current-context': 'pod',
    clusters: [{ name: 'pod', cluster: { server, ...(caCert === undefined ? {} : { 'certificate-authority-data': Buffer.from(caCert).toString('base64') }), ...(tlsServerName === undefined ? {} : { 'tls-server-name': tlsServerName }) } }],
    users: [{ name: 'pod', user: { token } }],
    contexts: [{ name: 'pod', context: { cluster: 'pod', user: 'pod', namespace } }],
  });
}
