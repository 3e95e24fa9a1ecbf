/**
 * The `PostgresTarget` resource (group `pglog.io`, version `v1alpha1`): one SSH-reachable
 * server running one or more PostgreSQL instances.
 *
 * The same types describe an object read from a standalone targets file
 * (`pglog collect --targets FILE`, see docs/targets.md) and the custom resource in the
 * cluster. They are the *normalized* form: every field that has a default is present, with the
 * default applied, so code below the loader never re-implements defaulting. A field whose
 * comment says "Default: ..." may be left out by the user.
 *
 * The doc comments become the CRD's OpenAPI descriptions (`kubectl explain`), so they speak to
 * the person writing the object.
 */

import type { Condition } from './common.ts';

/** `apiVersion` of every pglog resource in this version. */
export const API_VERSION = 'pglog.io/v1alpha1';
/** `kind` of a target object. */
export const TARGET_KIND = 'PostgresTarget';

/** The log formats pglog parses (PostgreSQL's `log_destination`). */
export const LOG_FORMATS = ['stderr', 'csvlog', 'jsonlog'] as const;
export type LogFormat = (typeof LOG_FORMATS)[number];

/** How a target's streams reach the collector; `auto` lets the operator choose by rate. */
export const TRANSPORTS = ['auto', 'inproc', 'proxy'] as const;
export type Transport = (typeof TRANSPORTS)[number];
/** The transport actually in use (what `auto` resolved to). */
export type ActiveTransport = Exclude<Transport, 'auto'>;

/**
 * Where reading begins in a log never collected before (docs/collector.md "First start"):
 * `newest` the newest log file from its first byte, `oldest` the oldest log file present from
 * its first byte, `now` the end of the newest file.
 */
export const START_POINTS = ['newest', 'oldest', 'now'] as const;
export type StartPoint = (typeof START_POINTS)[number];

/** Where a targets file is read: paths to key files (standalone) or a Secret (cluster). */
export type TargetsMode = 'standalone' | 'cluster';

/** Defaults applied to fields the user leaves out. */
export const TARGET_DEFAULTS = {
  port: 22,
  transport: 'auto',
  logDirectory: 'log',
  logFormat: 'stderr',
  logLinePrefix: '%m [%p] ',
  defaultEncoding: 'UTF8',
  sqlSocketDirectory: '/var/run/postgresql',
  sqlPort: 5432,
  sqlDatabase: 'postgres',
  sqlTimeoutSeconds: 5,
  sqlAllowSuperuser: false,
  collect: { logs: true, activity: false, locks: false, statements: false, databases: false, intervalSeconds: 15, statisticsIntervalSeconds: 15 },
} as const satisfies {
  port: number;
  transport: Transport;
  logDirectory: string;
  logFormat: LogFormat;
  logLinePrefix: string;
  defaultEncoding: string;
  sqlSocketDirectory: string;
  sqlPort: number;
  sqlDatabase: string;
  sqlTimeoutSeconds: number;
  sqlAllowSuperuser: boolean;
  collect: TargetCollect;
};

/** Bounds of the snapshot intervals (`spec.collect.intervalSeconds`, `statisticsIntervalSeconds`). */
export const SNAPSHOT_INTERVAL_BOUNDS = { min: 1, max: 3600 } as const;
/** Bounds of `spec.instances[].sql.timeoutSeconds`. */
export const SQL_TIMEOUT_BOUNDS = { min: 1, max: 300 } as const;

/**
 * A whole `PostgresTarget` object.
 * @validation self.metadata.name.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$') && size(self.metadata.name) <= 63 :: metadata.name must be a DNS-1123 label: at most 63 lower-case letters, digits and '-', starting and ending with a letter or digit
 */
export interface PostgresTarget {
  /** Always `pglog.io/v1alpha1`. */
  apiVersion: typeof API_VERSION;
  /** Always `PostgresTarget`. */
  kind: typeof TARGET_KIND;
  metadata: TargetMetadata;
  spec: PostgresTargetSpec;
  /** Written by pglog (operator and collector), never by the user; absent in a targets file. */
  status?: PostgresTargetStatus;
}

/** The subset of Kubernetes object metadata pglog reads. */
export interface TargetMetadata {
  /**
   * Name of the target: a DNS-1123 label (lower-case letters, digits and `-`, at most 63
   * characters, starting and ending with a letter or digit). Unique within its namespace. It
   * is the `target` column of the store's views and the `target` label of metrics.
   */
  name: string;
  /** Namespace (a DNS-1123 label). Optional in a targets file. */
  namespace?: string;
  /** Labels, as in Kubernetes: a `CollectorPool` may select targets by label. */
  labels?: Record<string, string>;
  /** Annotations, as in Kubernetes; pglog does not interpret them. */
  annotations?: Record<string, string>;
}

/** What to collect from a server and how to reach it. */
export interface PostgresTargetSpec {
  /**
   * Host name or IP address of the SSH server.
   * @minLength 1
   * @validation self.trim() != '' :: host must not be blank
   */
  host: string;
  /**
   * TCP port of the SSH server, 1-65535. Default: 22.
   * @default 22
   * @minimum 1
   * @maximum 65535
   */
  port: number;
  /**
   * SSH user name. SQL sessions (when enabled) default to the same PostgreSQL role. Any name
   * OpenSSH takes as `-l USER` (`alice@corp.example.com` too), but not one starting with `-`
   * or holding a blank or a control character.
   * @minLength 1
   * @pattern ^[^\x00-\x20\x7f-][^\x00-\x20\x7f]*$
   */
  user: string;
  /**
   * SSH credentials: key files in a targets file, a Secret in the cluster. Exactly one form.
   * A `PostgresTarget` in the cluster takes only `secretRef`: key files on the collector's
   * machine do not exist in a pod.
   * @crdType SshSecretRef
   */
  ssh: SshCredentials;
  /**
   * Name of the `CollectorPool` that collects this target. Ignored in standalone mode.
   * @pattern ^[a-z0-9]([-a-z0-9]*[a-z0-9])?$
   * @maxLength 63
   */
  pool?: string;
  /**
   * `inproc` (the collector's own SSH client), `proxy` (the OpenSSH sidecar), or `auto` (move
   * between them by measured rate, with hysteresis). Default: `auto`.
   * @default "auto"
   */
  transport: Transport;
  /**
   * Where reading begins in the log of an instance never collected before: `newest` (the
   * newest log file, from its first byte), `oldest` (the oldest log file in the log
   * directory, from its first byte) or `now` (the end of the newest file: only what is logged
   * from then on). Chosen once and stored with the stream's claim before the first byte is
   * read; every later start resumes from the store, whatever this says. An instance may set
   * its own. Default: the collector's `--start-at` (itself `newest` by default).
   */
  startAt?: StartPoint;
  /**
   * The PostgreSQL instances (clusters) on this server; at least one, unique names.
   * @minItems 1
   * @listMapKey name
   */
  instances: PostgresInstance[];
  /**
   * What to collect from every instance of this target. Default: logs only.
   * @default {}
   */
  collect: TargetCollect;
}

/** SSH key and known_hosts as files on the collector's machine (standalone mode only). */
export interface SshKeyFiles {
  /**
   * Path of the private key (OpenSSH or PEM format). A relative path is relative to the
   * directory of the targets file; the loader resolves it to an absolute path.
   */
  privateKeyFile: string;
  /**
   * Path of a known_hosts file holding the server's host key; the host key is always checked.
   * Relative like `privateKeyFile`.
   */
  knownHostsFile: string;
}

/** SSH key and known_hosts from a Secret in the target's namespace (cluster mode only). */
export interface SshSecretRef {
  /**
   * The Secret holding the private key under the key `id_ed25519` or `id_rsa`, and the
   * server's host key under `known_hosts`.
   */
  secretRef: SecretReference;
}

/** A Secret in the same namespace as the object that refers to it. */
export interface SecretReference {
  /**
   * Name of the Secret (a DNS-1123 subdomain).
   * @pattern ^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$
   * @maxLength 253
   */
  name: string;
}

export type SshCredentials = SshKeyFiles | SshSecretRef;

/** One PostgreSQL instance (cluster) on the server. */
export interface PostgresInstance {
  /**
   * Name of the instance, a DNS-1123 label unique within the target (`main`, `15-main`). It is
   * the `instance` column of the store's views.
   * @pattern ^[a-z0-9]([-a-z0-9]*[a-z0-9])?$
   * @maxLength 63
   */
  name: string;
  /**
   * Absolute path of the instance's data directory (`data_directory`) on the server.
   * @pattern ^/
   */
  dataDirectory: string;
  /**
   * The server's `log_directory`: absolute, or relative to `dataDirectory` as in
   * postgresql.conf. The loader resolves it to an absolute path. Default: `log`.
   * @default "log"
   * @minLength 1
   */
  logDirectory: string;
  /**
   * Format of the log files: `stderr`, `csvlog` or `jsonlog`. Default: `stderr`.
   * @default "stderr"
   */
  logFormat: LogFormat;
  /**
   * The server's `log_line_prefix`, exactly as in postgresql.conf (used to parse `stderr`
   * logs). Default: `%m [%p] ` (PostgreSQL's own default).
   * @default "%m [%p] "
   */
  logLinePrefix: string;
  /**
   * Where reading begins when this instance's log was never collected before: `newest`,
   * `oldest` or `now`, as `spec.startAt`. Default: `spec.startAt`.
   */
  startAt?: StartPoint;
  /**
   * Encodings of the log text, per database.
   * @default {}
   */
  encodings: InstanceEncodings;
  /**
   * How to open SQL sessions to this instance (for activity, locks and statements), through
   * the SSH connection to the server's Unix socket. Default: the values of its fields.
   * @default {}
   */
  sql: InstanceSql;
}

/** Which encoding the text of each database's log entries is in. */
export interface InstanceEncodings {
  /**
   * PostgreSQL encoding name (`UTF8`, `WIN1251`, `KOI8R`, `LATIN1`, ... or a usual alias such
   * as `windows-1251`), for entries of databases not listed in `databases` and of no database.
   * The loader stores the canonical name. Default: `UTF8`.
   * @default "UTF8"
   * @minLength 1
   */
  default: string;
  /**
   * Database name → encoding of that database, canonical names as for `default`. Default: none.
   * @default {}
   */
  databases: Record<string, string>;
}

/** Where and as whom SQL sessions connect (a Unix socket forwarded over SSH). */
export interface InstanceSql {
  /**
   * Directory of the server's Unix socket (`unix_socket_directories`). Default: `/var/run/postgresql`.
   * @default "/var/run/postgresql"
   * @pattern ^/
   */
  socketDirectory: string;
  /**
   * The instance's `port` (names the socket file `.s.PGSQL.<port>`), 1-65535. Default: 5432.
   * @default 5432
   * @minimum 1
   * @maximum 65535
   */
  port: number;
  /**
   * Database to connect to. Default: `postgres`.
   * @default "postgres"
   * @minLength 1
   */
  database: string;
  /**
   * PostgreSQL role to connect as. Default: `spec.user` (peer authentication over the socket).
   * @optional
   * @minLength 1
   */
  user: string;
  /**
   * Bound on opening the session and on each snapshot query (`statement_timeout`), in
   * seconds, 1-300. A snapshot that takes longer fails with SQL_TIMEOUT. Default: 5.
   * @default 5
   * @minimum 1
   * @maximum 300
   */
  timeoutSeconds: number;
  /**
   * Take snapshots even when `user` is a superuser. Without it a session whose role is a
   * superuser is refused right after it opens (SQL_ROLE_SUPERUSER): a superuser reaches the
   * server's OS account (`COPY ... TO PROGRAM`), so any SQL a role of the monitored server got
   * it to run would too. Use a role with only `pg_monitor` instead (docs/snapshots.md); true
   * keeps the warnings (the SqlRole condition, `pglog_sql_role_privileged`). Default: false.
   * @default false
   */
  allowSuperuser: boolean;
}

/** What to collect. */
export interface TargetCollect {
  /**
   * Read the server logs. Default: true.
   * @default true
   */
  logs: boolean;
  /**
   * Sample `pg_stat_activity` over SQL. Default: false.
   * @default false
   */
  activity: boolean;
  /**
   * Sample blocking chains from `pg_locks` over SQL. Default: false.
   * @default false
   */
  locks: boolean;
  /**
   * Sample `pg_stat_statements` over SQL and store what changed since the previous sample
   * (the extension must be installed in the instance's `sql.database`). Default: false.
   * @default false
   */
  statements: boolean;
  /**
   * Sample `pg_stat_database` over SQL and store what changed since the previous sample. Default: false.
   * @default false
   */
  databases: boolean;
  /**
   * Seconds between two activity and lock snapshots of each instance, 1-3600. Default: 15.
   * @default 15
   * @minimum 1
   * @maximum 3600
   */
  intervalSeconds: number;
  /**
   * Seconds between two samples of `pg_stat_statements` and `pg_stat_database`, 1-3600. Default: 15.
   * @default 15
   * @minimum 1
   * @maximum 3600
   */
  statisticsIntervalSeconds: number;
}

/** Observed state, written by the operator (`shard`, `transport`) and the owning collector. */
export interface PostgresTargetStatus {
  /** Index of the shard (and of the pod in the pool's StatefulSet) that owns this target. */
  shard?: number;
  /** The transport in use: `inproc` or `proxy`. */
  transport?: ActiveTransport;
  /** Smoothed read rates over all instances of the target. */
  rates?: TargetRates;
  /** How far collection is behind the end of the logs. */
  lag?: TargetLag;
  /** Time of the newest entry written to the store (RFC 3339). */
  lastEntryTime?: string;
  /**
   * Conditions such as `Ready` and `Connected`, as in Kubernetes.
   * @listMapKey type
   */
  conditions?: TargetCondition[];
  /** The `metadata.generation` this status describes. */
  observedGeneration?: number;
}

/** Smoothed read rates. */
export interface TargetRates {
  /**
   * Bytes of log read per second.
   * @type number
   */
  bytesPerSecond: number;
  /**
   * Log lines read per second.
   * @type number
   */
  linesPerSecond: number;
}

/** Collection lag. */
export interface TargetLag {
  /** Bytes between the committed offsets and the ends of the log files. */
  bytes: number;
  /**
   * Seconds between the newest committed entry and now.
   * @type number
   */
  seconds: number;
}

/** A condition, with the fields of Kubernetes' `metav1.Condition` (the one type all pglog resources use). */
export type TargetCondition = Condition;

/** Whether `collect` asks for any SQL snapshot: activity, locks, statements or databases. */
export function takesSnapshots(collect: TargetCollect): boolean {
  return collect.activity || collect.locks || collect.statements || collect.databases;
}

/** Whether the credentials are the standalone form (key files). */
export function isSshKeyFiles(ssh: SshCredentials): ssh is SshKeyFiles {
  return 'privateKeyFile' in ssh;
}
