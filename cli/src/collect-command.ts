/**
 * `pglog collect --targets FILE --store URL`: the standalone collector. Reads and validates
 * the targets file and every key file once, then runs until told to stop (SIGTERM/SIGINT,
 * wired by main.ts), flushing within --stop-timeout. `pglog collect --shard NAME` is cluster
 * mode (cluster/cluster-command.ts).
 */
import { readFile } from 'node:fs/promises';
import type { Writable } from 'node:stream';

import type { CollectConfig } from '@pglog/collector/collect/collect-types.ts';
import { Collector } from '@pglog/collector/collect/collector.ts';
import type { TargetCredentials } from '@pglog/collector/collect/credentials.ts';
import { loadTargetsFile } from '@pglog/collector/config/targets.ts';
import { createCollectorMetrics } from '@pglog/collector/observability/metrics.ts';
import { describeStore, storeUrlPasswords } from '@pglog/collector/store/store-url.ts';
import { isSshKeyFiles, type PostgresTarget } from '@pglog/common/api/postgres-target.ts';
import { PglogError } from '@pglog/common/errors.ts';
import { createLogger, registerSecret } from '@pglog/common/observability/logger.ts';

import { runClusterCollect } from './cluster-command.ts';
import { startCollectHttp } from './collect-http.ts';

export { COLLECT_USAGE, parseCollectArgs } from './collect-config.ts';

export interface CollectIO {
  /** Where the JSON log goes (standard output). */
  stdout: Writable;
  /** Calls `handler` once, with the signal, when the process is asked to stop. */
  onStopRequest(handler: (signal?: NodeJS.Signals) => void): void;
  /** Calls `handler` every time the process is asked to reload the targets file (SIGHUP). */
  onReloadRequest(handler: () => void): void;
  /** How to run this program again ([node, ...node flags, main script]): the sshproxy child. */
  selfCommand: readonly string[];
  /** The `collect` arguments as given (cluster mode: the launcher passes them to its child). */
  collectArgs: readonly string[];
  /** The process environment (cluster mode: the launcher passes it to its child). */
  env: Readonly<Record<string, string | undefined>>;
}

export async function runCollect(config: CollectConfig, io: CollectIO): Promise<number> {
  for (const password of storeUrlPasswords(config.storeUrl)) registerSecret(password);
  if (config.cluster !== null) return runClusterCollect(config, config.cluster, io);
  const targetsFile = config.targetsFile;
  if (targetsFile === null) throw new PglogError('USAGE', 'collect: --targets FILE is required');
  const log = createLogger({ level: config.logLevel, destination: io.stdout });
  const targets = await loadTargetsFile(targetsFile, { mode: 'standalone' });
  if (targets.length === 0) throw new PglogError('CONFIG_INVALID', `${targetsFile}: no PostgresTarget objects`);
  const credentials = await readCredentials(targets);
  const metrics = createCollectorMetrics();
  const collector = new Collector({ config, targets, credentials, log, metrics, selfCommand: io.selfCommand, logOutput: io.stdout, env: io.env });

  let stopRequested = false;
  let resolveStop!: () => void;
  const stopped = new Promise<void>((resolve) => {
    resolveStop = resolve;
  });
  io.onStopRequest(() => {
    if (stopRequested) return;
    stopRequested = true;
    log.info(`stop requested: flushing (at most ${config.stopTimeoutMs} ms)`);
    resolveStop();
  });

  const http = await startCollectHttp(config.listen, metrics, () => collector.readiness(), log);
  log.info({ store: describeStore(config.storeUrl), targets: targets.map((t) => t.metadata.name) }, 'pglog collect starting');

  io.onReloadRequest(() => {
    void reloadTargets(targetsFile, collector, log);
  });

  await Promise.race([collector.start(), stopped]);
  await stopped;
  const deadline = Date.now() + config.stopTimeoutMs;
  await collector.stop(deadline - 250);
  await http?.close();
  log.info('pglog collect stopped');
  return 0;
}

/** SIGHUP: `spec.transport` pins take effect at once; other edits are reported as needing a restart. */
async function reloadTargets(file: string, collector: Collector, log: ReturnType<typeof createLogger>): Promise<void> {
  try {
    const targets = await loadTargetsFile(file, { mode: 'standalone' });
    const ignored = collector.applyTargets(targets);
    log.info(
      { targetsFile: file, needsRestart: ignored },
      `targets file reloaded: transport pins applied${ignored.length === 0 ? '' : `; not applied until a restart: ${ignored.join(', ')}`}`,
    );
  } catch (e) {
    log.error({ targetsFile: file, err: e }, `targets file reload failed, keeping the running configuration: ${(e as Error).message}`);
  }
}

/**
 * Reads every target's private key and known_hosts once; a missing or unreadable file stops
 * start-up. A file many targets name (a fleet's one known_hosts, one monitoring key) is read
 * once and its contents shared, not held once per target.
 */
async function readCredentials(targets: readonly PostgresTarget[]): Promise<Map<string, TargetCredentials>> {
  const out = new Map<string, TargetCredentials>();
  const files = new Map<string, Promise<Buffer>>();
  const texts = new Map<string, string>();
  const readConfigFile = (path: string, target: string, field: string): Promise<Buffer> => {
    let read = files.get(path);
    if (read === undefined) files.set(path, (read = readConfigFileOnce(path, target, field)));
    return read;
  };
  for (const t of targets) {
    const ssh = t.spec.ssh;
    if (!isSshKeyFiles(ssh)) {
      throw new PglogError(
        'CONFIG_INVALID',
        `target ${t.metadata.name}: spec.ssh.secretRef needs the cluster; a targets file gives privateKeyFile and knownHostsFile`,
      );
    }
    const privateKey = await readConfigFile(ssh.privateKeyFile, t.metadata.name, 'spec.ssh.privateKeyFile');
    registerSecret(privateKey.toString('utf8').trim());
    const knownHosts = await readConfigFile(ssh.knownHostsFile, t.metadata.name, 'spec.ssh.knownHostsFile');
    out.set(t.metadata.name, {
      privateKey,
      privateKeySource: ssh.privateKeyFile,
      knownHosts: { text: sharedText(texts, ssh.knownHostsFile, knownHosts), source: ssh.knownHostsFile },
    });
  }
  return out;
}

/** The file's text, decoded once per path. */
function sharedText(texts: Map<string, string>, path: string, bytes: Buffer): string {
  let text = texts.get(path);
  if (text === undefined) texts.set(path, (text = bytes.toString('utf8')));
  return text;
}

async function readConfigFileOnce(path: string, target: string, field: string): Promise<Buffer> {
  try {
    return await readFile(path);
  } catch (e) {
    throw new PglogError('CONFIG_INVALID', `target ${target}: ${field} ${path} cannot be read: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
  }
}
