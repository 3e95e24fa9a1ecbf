/**
 * How a command reaches the Kubernetes API: a kubeconfig file (`--kubeconfig`, optionally
 * `--kube-context`), or the pod's service account (in-cluster, from the environment
 * Kubernetes sets in every pod). Decided once from the arguments and the environment at the
 * entry point (`pglog collect --shard`, `pglog operator`); the files are read at start.
 */
import { PglogError } from '../errors.ts';
import { inClusterConfig, loadKubeconfigFile, type KubeConfig } from '../../../operator/src/kube/config.ts';

/** Where a pod's service account credentials are mounted. */
export const SERVICE_ACCOUNT_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';

export type KubeAccess =
  | { kind: 'kubeconfig'; path: string; context: string | null }
  | { kind: 'in-cluster'; host: string; port: string; tokenFile: string; caFile: string; namespaceFile: string };

/** `--kubeconfig`/`--kube-context` and the environment → access; USAGE errors name `command`. */
export function parseKubeAccess(command: string, kubeconfig: string | undefined, context: string | undefined, env: Readonly<Record<string, string | undefined>>): KubeAccess {
  if (kubeconfig !== undefined) return { kind: 'kubeconfig', path: kubeconfig, context: context ?? null };
  if (context !== undefined) throw new PglogError('USAGE', `${command}: --kube-context needs --kubeconfig PATH`);
  const host = env['KUBERNETES_SERVICE_HOST'];
  const port = env['KUBERNETES_SERVICE_PORT'];
  if (host === undefined || host === '' || port === undefined || port === '') {
    throw new PglogError('USAGE', `${command}: outside a pod it needs --kubeconfig PATH (KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not set)`);
  }
  return {
    kind: 'in-cluster', host, port,
    tokenFile: `${SERVICE_ACCOUNT_DIR}/token`, caFile: `${SERVICE_ACCOUNT_DIR}/ca.crt`, namespaceFile: `${SERVICE_ACCOUNT_DIR}/namespace`,
  };
}

export function loadKubeAccess(access: KubeAccess): Promise<KubeConfig> {
  if (access.kind === 'kubeconfig') return loadKubeconfigFile(access.path, access.context ?? undefined);
  return inClusterConfig({ host: access.host, port: access.port, tokenFile: access.tokenFile, caFile: access.caFile, namespaceFile: access.namespaceFile });
}
