/**
 * `pglog collect` configuration: parsed and validated once from the command line (and the
 * store URL from the environment when not given), then passed down as one plain object.
 * Nothing below the entry point reads argv or the environment.
 */
import { type BatcherOptions, DEFAULT_BATCHER_OPTIONS } from '@pglog/collector/collect/batcher.ts';
import type { CollectConfig } from '@pglog/collector/collect/collect-types.ts';
import { DEFAULT_MAX_ENTRY_BYTES } from '@pglog/collector/logformat/line-splitter.ts';
import { DEFAULT_TEMPLATE_CACHE_BYTES } from '@pglog/collector/logformat/normalize/normalize.ts';
import { MAX_STORE_CONNECTIONS } from '@pglog/collector/store/store-writer.ts';
import { DEFAULT_CHANNEL_WINDOW_BYTES, MAX_CHANNEL_WINDOW_BYTES, MIN_CHANNEL_WINDOW_BYTES } from '@pglog/collector/transport/ssh-window.ts';
import { START_POINTS, type StartPoint } from '@pglog/common/api/postgres-target.ts';
import { PglogError } from '@pglog/common/errors.ts';
import { parseLogLevelOption } from '@pglog/common/observability/logger.ts';

import { CLUSTER_OPTIONS, CLUSTER_USAGE, parseClusterConfig } from './cluster-config.ts';
import { parseCommandArgs, stringOptions } from './command-args.ts';
import { parseTransportConfig, TRANSPORT_OPTIONS, TRANSPORT_USAGE } from './transport-config.ts';
import { wholeNumberOption } from './whole-number-option.ts';

/**
 * Batches committing at once by default: enough to keep the store's cores busy while the
 * collector maps and encodes the next chunk (docs/benchmarks.md, commit benchmark), few enough
 * to be a small share of a store's max_connections per collector.
 */
export const DEFAULT_STORE_CONNECTIONS = 4;

export const COLLECT_USAGE = `usage: pglog collect --targets FILE [--store URL | --store-file FILE] [OPTIONS]
       pglog collect --shard NAME [--namespace NS] [--kubeconfig PATH] [OPTIONS]
  Streams the logs of every PostgresTarget in FILE (a YAML stream), or of the targets the
  operator assigned to the CollectorShard NAME, over SSH into the store.
  The store URL may also come from the environment variable PGLOG_STORE_URL (keeps a password
  out of the process list).
  --targets FILE            targets file (see docs/targets.md)
  --store URL               store PostgreSQL URL (postgres://user:pass@host/db)
  --store-file FILE         a file whose first line is the store URL
  --listen HOST:PORT        /metrics, /healthz, /readyz (default 127.0.0.1:9187; 'off' to disable)
  --log-level LEVEL         trace|debug|info|warn|error (default info)
  --start-at WHERE          newest|oldest|now: where a log never collected before starts, unless its
                            target says (newest: the newest file from byte 0, the default; oldest:
                            the oldest file present; now: the end of the newest file)
  --batch-rows N            commit after N events (default ${DEFAULT_BATCHER_OPTIONS.maxRows})
  --batch-bytes SIZE        ... or after SIZE of log (default 16MiB)
  --batch-ms MS             ... or MS after the oldest pending event (default ${DEFAULT_BATCHER_OPTIONS.maxDelayMs})
  --store-connections N     store connections, batches of different streams commit on them side
                            by side (default ${DEFAULT_STORE_CONNECTIONS}, 1 to ${MAX_STORE_CONNECTIONS})
  --memory-budget SIZE      bytes held for the store, whole process (default 20MiB)
  --target-memory-budget SIZE  ... per target (default 10MiB)
  --max-entry-bytes SIZE    longer entries are truncated and counted (default 10MiB)
  --template-cache-bytes SIZE  memory of the query template cache, whole process (default 32MiB)
  --retention-days N        drop event partitions older than N days (default: keep)
  --stop-timeout MS         on SIGTERM/SIGINT: flush and exit within MS (default 10000)
  --keepalive-ms MS         SSH keepalive interval (default 5000; 3 missed answers end the connection)
  --ssh-window SIZE         log held per stream of an inproc target while it waits: its SSH window
                            (default 512KiB, 64KiB to 2MiB)
${TRANSPORT_USAGE}
${CLUSTER_USAGE}
  SIZE takes a number of bytes or a unit: 512KiB, 64MiB, 1GiB (KB/MB/GB are read as powers of 1024).`;

/** `pglog collect` arguments → configuration. `env` is the process environment (entry point only). */
export function parseCollectArgs(argv: string[], env: Readonly<Record<string, string | undefined>>, readFile: (path: string) => string): CollectConfig {
  const { values } = parseCommandArgs(
    {
      args: argv,
      allowPositionals: false,
      options: {
        ...stringOptions(
          'targets',
          'store',
          'store-file',
          'listen',
          'log-level',
          'start-at',
          'batch-rows',
          'batch-bytes',
          'batch-ms',
          'store-connections',
          'memory-budget',
          'target-memory-budget',
          'max-entry-bytes',
          'template-cache-bytes',
          'retention-days',
          'stop-timeout',
          'keepalive-ms',
          'ssh-window',
        ),
        ...TRANSPORT_OPTIONS,
        ...CLUSTER_OPTIONS,
      },
    },
    (message) => `collect: ${message}`,
  );
  const cluster = parseClusterConfig(values, env);
  if (values.targets !== undefined && cluster !== null)
    throw new PglogError('USAGE', 'collect: give --targets FILE (standalone) or --shard NAME (cluster), not both');
  if (values.targets === undefined && cluster === null) throw new PglogError('USAGE', 'collect: --targets FILE is required (or --shard NAME: cluster mode)');
  const storeUrl = storeUrlFrom(values.store, values['store-file'], env, readFile);
  const logLevel = parseLogLevelOption(values['log-level'], 'collect');
  const startAt = startPointOption(values['start-at']);
  const batcher: BatcherOptions = {
    ...DEFAULT_BATCHER_OPTIONS,
    maxRows: count(values['batch-rows'], '--batch-rows', DEFAULT_BATCHER_OPTIONS.maxRows, 1),
    maxBytes: size(values['batch-bytes'], '--batch-bytes', DEFAULT_BATCHER_OPTIONS.maxBytes),
    maxDelayMs: count(values['batch-ms'], '--batch-ms', DEFAULT_BATCHER_OPTIONS.maxDelayMs, 1),
    budgetBytes: size(values['memory-budget'], '--memory-budget', DEFAULT_BATCHER_OPTIONS.budgetBytes),
    targetBudgetBytes: size(values['target-memory-budget'], '--target-memory-budget', DEFAULT_BATCHER_OPTIONS.targetBudgetBytes),
  };
  if (batcher.targetBudgetBytes > batcher.budgetBytes) {
    throw new PglogError('USAGE', `collect: --target-memory-budget (${batcher.targetBudgetBytes}) must not exceed --memory-budget (${batcher.budgetBytes})`);
  }
  const storeConnections = count(values['store-connections'], '--store-connections', DEFAULT_STORE_CONNECTIONS, 1);
  if (storeConnections > MAX_STORE_CONNECTIONS)
    throw new PglogError('USAGE', `collect: --store-connections must be at most ${MAX_STORE_CONNECTIONS}, got ${storeConnections}`);
  const retention = values['retention-days'];
  const sshWindowBytes = size(values['ssh-window'], '--ssh-window', DEFAULT_CHANNEL_WINDOW_BYTES);
  if (sshWindowBytes < MIN_CHANNEL_WINDOW_BYTES || sshWindowBytes > MAX_CHANNEL_WINDOW_BYTES) {
    throw new PglogError(
      'USAGE',
      `collect: --ssh-window must be from ${MIN_CHANNEL_WINDOW_BYTES} to ${MAX_CHANNEL_WINDOW_BYTES} bytes (64KiB to 2MiB), got ${sshWindowBytes}`,
    );
  }
  return {
    targetsFile: values.targets ?? null,
    cluster,
    storeUrl,
    listen: listenFrom(values.listen ?? '127.0.0.1:9187'),
    logLevel,
    startAt,
    batcher,
    storeConnections,
    maxEntryBytes: size(values['max-entry-bytes'], '--max-entry-bytes', DEFAULT_MAX_ENTRY_BYTES),
    templateCacheBytes: size(values['template-cache-bytes'], '--template-cache-bytes', DEFAULT_TEMPLATE_CACHE_BYTES),
    retentionDays: retention === undefined ? null : count(retention, '--retention-days', 0, 1),
    stopTimeoutMs: count(values['stop-timeout'], '--stop-timeout', 10_000, 100),
    keepaliveIntervalMs: count(values['keepalive-ms'], '--keepalive-ms', 5_000, 100),
    sshWindowBytes,
    transport: parseTransportConfig(values),
  };
}

/** `--start-at`: a START_POINTS value; `beginning` and `end` are the names of earlier versions (newest, now). */
function startPointOption(value: string | undefined): StartPoint {
  if (value === undefined || value === 'beginning') return 'newest';
  if (value === 'end') return 'now';
  const point = START_POINTS.find((p) => p === value);
  if (point === undefined) throw new PglogError('USAGE', `collect: --start-at must be ${START_POINTS.join(', ')}, got '${value}'`);
  return point;
}

function storeUrlFrom(
  flag: string | undefined,
  file: string | undefined,
  env: Readonly<Record<string, string | undefined>>,
  readFile: (path: string) => string,
): string {
  if (flag !== undefined && file !== undefined) throw new PglogError('USAGE', 'collect: give --store or --store-file, not both');
  let url: string | undefined = flag;
  if (file !== undefined) {
    try {
      url = readFile(file).split('\n')[0]?.trim();
    } catch (e) {
      throw new PglogError('USAGE', `collect: cannot read --store-file ${file}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
    }
  }
  url ??= env.PGLOG_STORE_URL;
  if (url === undefined || url === '') throw new PglogError('USAGE', 'collect: no store: give --store URL, --store-file FILE or set PGLOG_STORE_URL');
  if (!/^postgres(?:ql)?:\/\//.test(url)) throw new PglogError('USAGE', 'collect: the store URL must start with postgres:// or postgresql://');
  return url;
}

function listenFrom(text: string): CollectConfig['listen'] {
  if (text === 'off') return null;
  const m = /^(?:\[([^\]]+)\]|([^:]*)):(\d{1,5})$/.exec(text);
  const port = m === null ? NaN : Number(m[3]);
  if (m === null || port > 65535) throw new PglogError('USAGE', `collect: --listen must be HOST:PORT or off, got '${text}'`);
  return { host: m[1] ?? (m[2] === '' ? '0.0.0.0' : m[2]!), port };
}

function count(text: string | undefined, flag: string, fallback: number, min: number): number {
  return wholeNumberOption('collect', flag, text, fallback, min);
}

const UNITS: Record<string, number> = {
  '': 1,
  b: 1,
  k: 1024,
  kb: 1024,
  kib: 1024,
  m: 1024 ** 2,
  mb: 1024 ** 2,
  mib: 1024 ** 2,
  g: 1024 ** 3,
  gb: 1024 ** 3,
  gib: 1024 ** 3,
};

/** `64MiB` → bytes; KB/MB/GB are read as powers of 1024, as PostgreSQL does. */
export function parseSize(text: string): number | null {
  const m = /^(\d+(?:\.\d+)?)\s*([a-zA-Z]*)$/.exec(text.trim());
  if (m === null) return null;
  const unit = UNITS[m[2]!.toLowerCase()];
  if (unit === undefined) return null;
  const n = Math.floor(Number(m[1]) * unit);
  return Number.isSafeInteger(n) && n > 0 ? n : null;
}

function size(text: string | undefined, flag: string, fallback: number): number {
  if (text === undefined) return fallback;
  const n = parseSize(text);
  if (n === null) throw new PglogError('USAGE', `collect: ${flag} must be a size such as 4MiB or 1048576, got '${text}'`);
  return n;
}
