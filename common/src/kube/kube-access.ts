/**
 * How a command reaches the Kubernetes API, found as kubectl finds it: `--kubeconfig PATH`;
 * else every file of $KUBECONFIG, merged; else, in a pod, its service account (in-cluster,
 * from the environment Kubernetes sets in every pod); else ~/.kube/config. `--context`
 * picks a context of the kubeconfig. Decided once from the arguments and the environment at
 * the entry point (`pglog collect --shard`, `pglog operator`); the files are read at start.
 */
import { delimiter, join } from 'node:path';

import { PglogError } from '../errors.ts';
import { inClusterConfig, type KubeConfig, loadKubeconfig } from './config.ts';

/** Where a pod's service account credentials are mounted. */
export const SERVICE_ACCOUNT_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';

export type KubeAccess =
  | {
      kind: 'kubeconfig';
      /** The files, merged in this order (the first that sets a value wins). */
      paths: string[];
      context: string | null;
      /** How they were found, for messages: --kubeconfig, $KUBECONFIG or ~/.kube/config. */
      from: '--kubeconfig' | 'KUBECONFIG' | '~/.kube/config';
      /** The environment an exec credential plugin runs with. */
      env: Readonly<Record<string, string | undefined>>;
    }
  | { kind: 'in-cluster'; host: string; port: string; tokenFile: string; caFile: string; namespaceFile: string };

/** `--kubeconfig`/`--context` and the environment → access; USAGE errors name `command`. */
export function parseKubeAccess(
  command: string,
  kubeconfig: string | undefined,
  context: string | undefined,
  env: Readonly<Record<string, string | undefined>>,
): KubeAccess {
  const ctx = context ?? null;
  if (kubeconfig !== undefined) {
    if (kubeconfig === '') throw new PglogError('USAGE', `${command}: --kubeconfig needs a path`);
    return { kind: 'kubeconfig', paths: [kubeconfig], context: ctx, from: '--kubeconfig', env };
  }
  // kubectl's rule: the list is split on the OS path separator, empty entries are ignored.
  const listed = (env['KUBECONFIG'] ?? '').split(delimiter).filter((p) => p !== '');
  if (listed.length > 0) return { kind: 'kubeconfig', paths: listed, context: ctx, from: 'KUBECONFIG', env };
  const host = env['KUBERNETES_SERVICE_HOST'];
  const port = env['KUBERNETES_SERVICE_PORT'];
  if (host !== undefined && host !== '' && port !== undefined && port !== '') {
    if (context !== undefined)
      throw new PglogError('USAGE', `${command}: --context needs a kubeconfig (--kubeconfig PATH or KUBECONFIG); in a pod the service account is used`);
    return {
      kind: 'in-cluster',
      host,
      port,
      tokenFile: `${SERVICE_ACCOUNT_DIR}/token`,
      caFile: `${SERVICE_ACCOUNT_DIR}/ca.crt`,
      namespaceFile: `${SERVICE_ACCOUNT_DIR}/namespace`,
    };
  }
  const home = env['HOME'];
  if (home === undefined || home === '') {
    throw new PglogError(
      'USAGE',
      `${command}: outside a pod it needs --kubeconfig PATH, KUBECONFIG or ~/.kube/config (KUBERNETES_SERVICE_HOST and HOME are not set)`,
    );
  }
  return { kind: 'kubeconfig', paths: [join(home, '.kube', 'config')], context: ctx, from: '~/.kube/config', env };
}

export function loadKubeAccess(access: KubeAccess): Promise<KubeConfig> {
  if (access.kind === 'kubeconfig') {
    return loadKubeconfig({
      paths: access.paths,
      mustExist: access.from !== 'KUBECONFIG',
      env: access.env,
      ...(access.context === null ? {} : { context: access.context }),
    });
  }
  return inClusterConfig({ host: access.host, port: access.port, tokenFile: access.tokenFile, caFile: access.caFile, namespaceFile: access.namespaceFile });
}
