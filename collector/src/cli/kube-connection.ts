/**
 * How a command reaches the Kubernetes API: a kubeconfig file (`--kubeconfig`), or the pod's
 * service account (in-cluster). Decided from the arguments and the environment at the entry
 * point; the files are read when the command starts.
 */
import { PglogError } from '../errors.ts';
import { inClusterConfig, loadKubeconfigFile, type KubeConfig } from '../../../operator/src/kube/config.ts';

const SERVICE_ACCOUNT_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';

export interface KubeConnection {
  /** For messages: the kubeconfig path or "in-cluster". */
  readonly source: string;
  /** The pod's namespace (downward API POD_NAMESPACE), when known. */
  readonly podNamespace: string | undefined;
  load(): Promise<KubeConfig>;
}

export function kubeConnectionFrom(command: string, kubeconfig: string | undefined, env: NodeJS.ProcessEnv): KubeConnection {
  const podNamespace = env['POD_NAMESPACE'] || undefined;
  if (kubeconfig !== undefined) {
    return { source: kubeconfig, podNamespace, load: () => loadKubeconfigFile(kubeconfig) };
  }
  const host = env['KUBERNETES_SERVICE_HOST'];
  const port = env['KUBERNETES_SERVICE_PORT'];
  if (host === undefined || host === '' || port === undefined || port === '') {
    throw new PglogError('USAGE', `${command}: not in a pod (KUBERNETES_SERVICE_HOST/PORT unset): give --kubeconfig PATH`);
  }
  return {
    source: 'in-cluster',
    podNamespace,
    load: () => inClusterConfig({
      host, port: Number(port), tokenFile: `${SERVICE_ACCOUNT_DIR}/token`, caFile: `${SERVICE_ACCOUNT_DIR}/ca.crt`, namespaceFile: `${SERVICE_ACCOUNT_DIR}/namespace`,
    }),
  };
}
