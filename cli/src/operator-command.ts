/**
 * `pglog operator`: the Kubernetes operator (docs/operator.md). Arguments and the
 * environment are parsed here once; everything below gets a validated OperatorConfig.
 */
import { hostname } from 'node:os';
import type { Writable } from 'node:stream';

import { PglogError } from '@pglog/common/errors.ts';
import { createKubeClient } from '@pglog/common/kube/client.ts';
import { type KubeAccess, loadKubeAccess, parseKubeAccess } from '@pglog/common/kube/kube-access.ts';
import { createLogger, type OptionLogLevel, parseLogLevelOption } from '@pglog/common/observability/logger.ts';
import { type OperatorConfig, runOperator } from '@pglog/operator/controller/run-operator.ts';
import { imageAllowed, imageRepository, parseAllowedImages } from '@pglog/operator/desired/image-allow-list.ts';
import { parseImageReference } from '@pglog/operator/desired/image-reference.ts';
import { parseNamespaceList, parseStoreSecretList } from '@pglog/operator/desired/pool-policy.ts';

import { parseCommandArgs, stringOptions } from './command-args.ts';
import { wholeNumberOption } from './whole-number-option.ts';

export const OPERATOR_USAGE = `usage: pglog operator [OPTIONS]
  Runs the Kubernetes operator: shards the PostgresTargets of each CollectorPool over its
  collector pods by measured load and writes their CollectorShards (docs/operator.md).
  --kubeconfig PATH         kubeconfig file (default: the files of KUBECONFIG, merged; else in a
                            pod its service account; else ~/.kube/config)
  --context NAME            the kubeconfig context to use (default: its current-context;
                            --kube-context is the same)
  --namespace NS            watch only NS (default: all namespaces)
  --lease-namespace NS      namespace of the leader Lease (default: the pod's namespace)
  --lease-name NAME         name of the leader Lease (default pglog-operator)
  --lease-owner-deployment NAME
                            the operator's Deployment: owner of the Lease, so deleting the
                            Deployment (helm uninstall) deletes the Lease too
  --identity ID             this replica's name in the Lease (default: POD_NAME, else the host name)
  --image IMAGE             collector and sidecar image of pools that name none (default: PGLOG_IMAGE)
  --allowed-images IMAGE,... the only images pools may run, each naming its registry: a
                            repository (any tag or digest), a prefix ending in /, REPO:PATTERN
                            (tags matching, * any run) or REPO@sha256:HEX (default: the
                            repository of --image); a pool naming another gets Ready False,
                            reason ImageNotAllowed
  --allowed-store-secrets NAME,...
                            the only Secrets pools may name as their store (spec.store.secretRef),
                            each NAME or NAMESPACE/NAME (default pglog-store); a pool naming
                            another gets Ready False, reason StoreSecretNotAllowed
  --collector-namespaces NS,...
                            namespaces whose pools get workloads (default: every watched
                            one); a pool elsewhere gets Ready False, reason NamespaceNotAllowed
  --service-account NAME    service account of the collector pods (default pglog-collector)
  --listen HOST:PORT        /metrics, /healthz and /readyz (default 0.0.0.0:8080)
  --workers N               pools reconciled in parallel (default 2)
  --resync SECONDS          reconcile every pool at least this often (default 60)
  --lease-duration SECONDS  leader Lease duration (default 15; renew deadline 2/3 of it)
  --log-level LEVEL         trace|debug|info|warn|error (default info)`;

/** The store Secret of the chart's pool and of the docs' examples. */
const DEFAULT_STORE_SECRET = 'pglog-store';

export interface OperatorCommandConfig {
  operator: OperatorConfig;
  kube: KubeAccess;
  logLevel: OptionLogLevel;
}

export function parseOperatorArgs(argv: string[], env: NodeJS.ProcessEnv): OperatorCommandConfig {
  const { values } = parseCommandArgs(
    {
      args: argv,
      allowPositionals: false,
      options: stringOptions(
        'kubeconfig',
        'context',
        'kube-context',
        'namespace',
        'lease-namespace',
        'lease-name',
        'lease-owner-deployment',
        'identity',
        'image',
        'allowed-images',
        'allowed-store-secrets',
        'collector-namespaces',
        'service-account',
        'listen',
        'workers',
        'resync',
        'lease-duration',
        'log-level',
      ),
    },
    (message) => `operator: ${message}`,
  );
  const kube = parseKubeAccess('operator', values.kubeconfig, values.context ?? values['kube-context'], env);
  const leaseNamespace = values['lease-namespace'] ?? nonEmpty(env['POD_NAMESPACE']) ?? values.namespace ?? 'default';
  const image = values.image ?? env['PGLOG_IMAGE'];
  if (image === undefined || image === '')
    throw new PglogError('USAGE', 'operator: --image IMAGE (or PGLOG_IMAGE) is required: the collector image of pools that name none');
  const reference = parseImageReference(image);
  if (!reference.ok) throw new PglogError('USAGE', `operator: --image ${image} is not an image reference: ${reference.problem}`);
  if (reference.reference.domain === undefined) {
    throw new PglogError('USAGE', `operator: --image ${image} names no registry host: write it as pulled, e.g. docker.io/library/${image}`);
  }
  const allowedImages = parseAllowedImages(values['allowed-images'] ?? imageRepository(image));
  if (!imageAllowed(image, allowedImages)) {
    throw new PglogError(
      'USAGE',
      `operator: --image ${image} is not in --allowed-images (${allowedImages.join(', ')}): pools that name no image would all be refused`,
    );
  }
  const allowedStoreSecrets = parseStoreSecretList(values['allowed-store-secrets'] ?? DEFAULT_STORE_SECRET);
  const collectorNamespaces = values['collector-namespaces'] === undefined ? undefined : parseNamespaceList(values['collector-namespaces']);
  const leaseSeconds = wholeNumberOption('operator', '--lease-duration', values['lease-duration'], 15, 2);
  return {
    kube,
    logLevel: parseLogLevelOption(values['log-level'], 'operator'),
    operator: {
      namespace: values.namespace,
      leaseNamespace,
      leaseName: values['lease-name'] ?? 'pglog-operator',
      ...(values['lease-owner-deployment'] === undefined ? {} : { leaseOwnerDeployment: values['lease-owner-deployment'] }),
      identity: values.identity ?? env['POD_NAME'] ?? `${hostname()}-${process.pid}`,
      leaseDurationMs: leaseSeconds * 1000,
      renewDeadlineMs: Math.round((leaseSeconds * 1000 * 2) / 3),
      retryPeriodMs: Math.max(500, Math.round((leaseSeconds * 1000) / 7.5)),
      defaultImage: image,
      serviceAccountName: values['service-account'] ?? 'pglog-collector',
      policy: { allowedImages, allowedStoreSecrets, ...(collectorNamespaces === undefined ? {} : { collectorNamespaces }) },
      workers: wholeNumberOption('operator', '--workers', values.workers, 2, 1),
      resyncMs: wholeNumberOption('operator', '--resync', values.resync, 60, 1) * 1000,
      listen: parseListen(values.listen ?? '0.0.0.0:8080'),
    },
  };
}

function nonEmpty(text: string | undefined): string | undefined {
  return text === undefined || text === '' ? undefined : text;
}

function parseListen(text: string): { host: string; port: number } {
  const colon = text.lastIndexOf(':');
  const port = Number(text.slice(colon + 1));
  if (colon < 0 || !Number.isInteger(port) || port < 0 || port > 65535) throw new PglogError('USAGE', `operator: --listen must be HOST:PORT, got '${text}'`);
  return { host: text.slice(0, colon) || '0.0.0.0', port };
}

export interface OperatorIO {
  stdout: Writable;
  onStopRequest(handler: () => void): void;
}

export async function runOperatorCommand(config: OperatorCommandConfig, io: OperatorIO): Promise<number> {
  const log = createLogger({ level: config.logLevel, destination: io.stdout });
  const access = await loadKubeAccess(config.kube);
  const client = createKubeClient(access, { userAgent: 'pglog-operator' });
  // Leader election on sockets of its own: a renewal must not queue behind thousands of status writes.
  const leaseClient = createKubeClient(access, { userAgent: 'pglog-operator-lease', maxSockets: 2 });
  const stop = new AbortController();
  io.onStopRequest(() => {
    log.info('stopping: giving up the Lease');
    stop.abort();
  });
  try {
    await runOperator(config.operator, client, log, stop.signal, leaseClient);
  } finally {
    client.close();
    leaseClient.close();
  }
  return 0;
}
