/**
 * `pglog collect --shard NAME` options (cluster mode), parsed once with the rest of the
 * command line. The in-cluster API server address comes from the environment Kubernetes
 * sets in every pod; the entry point passes the environment in, nothing below reads it.
 */
import { parseTuning } from '@pglog/collector/cluster/tuning.ts';
import type { ClusterConfig } from '@pglog/collector/collect/collect-types.ts';
import { PglogError } from '@pglog/common/errors.ts';
import { type KubeAccess, parseKubeAccess } from '@pglog/common/kube/kube-access.ts';

import { stringOptions } from './command-args.ts';
import { wholeNumberOption } from './whole-number-option.ts';

export const CLUSTER_USAGE = `cluster mode (instead of --targets):
  --shard NAME              collect the targets the operator assigned to CollectorShard NAME
  --namespace NS            its namespace (default: the pod's, or the kubeconfig context's)
  --kubeconfig PATH         a kubeconfig file (default: the files of KUBECONFIG, merged; else in a
                            pod its service account; else ~/.kube/config)
  --context NAME            the kubeconfig context to use (default: its current-context;
                            --kube-context is the same)
  --status-interval S       write the shard's status at most every S seconds (default 10)
  --resolve-interval S      read targets and their Secrets again every S seconds (default 30)
  The process starts the collector as a child with the shard's Node.js tuning
  (spec.tuning) and starts it again when the tuning changes.`;

export const CLUSTER_OPTIONS = stringOptions('shard', 'namespace', 'kubeconfig', 'context', 'kube-context', 'status-interval', 'resolve-interval', 'launched');

type ClusterValues = Partial<Record<keyof typeof CLUSTER_OPTIONS, string | undefined>>;

const DNS1123 = /^[a-z0-9](?:[-a-z0-9]*[a-z0-9])?(?:\.[a-z0-9](?:[-a-z0-9]*[a-z0-9])?)*$/;

/** Cluster options → configuration; null when `--shard` is not given (and no other cluster option is). */
export function parseClusterConfig(values: ClusterValues, env: Readonly<Record<string, string | undefined>>): ClusterConfig | null {
  const shard = values.shard;
  if (shard === undefined) {
    const stray = (Object.keys(CLUSTER_OPTIONS) as Array<keyof typeof CLUSTER_OPTIONS>).find((k) => values[k] !== undefined);
    if (stray !== undefined) throw new PglogError('USAGE', `collect: --${stray} needs --shard NAME`);
    return null;
  }
  if (!DNS1123.test(shard) || shard.length > 253)
    throw new PglogError('USAGE', `collect: --shard must be a CollectorShard name (lower-case DNS-1123), got '${shard}'`);
  const namespace = values.namespace ?? null;
  if (namespace !== null && (!DNS1123.test(namespace) || namespace.length > 63 || namespace.includes('.'))) {
    throw new PglogError('USAGE', `collect: --namespace must be a DNS-1123 label, got '${namespace}'`);
  }
  const kube: KubeAccess = parseKubeAccess('collect --shard', values.kubeconfig, values.context ?? values['kube-context'], env);
  const launched = values.launched === undefined ? null : parseTuning(values.launched);
  const pod = env.POD_NAME ?? env.HOSTNAME;
  return {
    shard,
    namespace,
    kube,
    statusIntervalMs: wholeNumberOption('collect', '--status-interval', values['status-interval'], 10, 1) * 1000,
    resolveIntervalMs: wholeNumberOption('collect', '--resolve-interval', values['resolve-interval'], 30, 1) * 1000,
    pod: pod === undefined || pod === '' ? null : pod,
    launched,
  };
}
