/**
 * The schema of a PostgresTarget object (docs/targets.md): validates one document of a
 * targets file field by field and normalizes it, with defaults applied, encodings canonical,
 * `logDirectory` an absolute path on the server and (standalone) key file paths absolute on
 * this machine.
 */
import path from 'node:path';

import type {
  InstanceEncodings,
  InstanceSql,
  PostgresInstance,
  PostgresTarget,
  PostgresTargetSpec,
  SshCredentials,
  TargetCollect,
  TargetMetadata,
  TargetsMode,
} from '@pglog/common/api/postgres-target.ts';
import {
  API_VERSION,
  LOG_FORMATS,
  SNAPSHOT_INTERVAL_BOUNDS,
  SQL_TIMEOUT_BOUNDS,
  START_POINTS,
  takesSnapshots,
  TARGET_DEFAULTS,
  TARGET_KIND,
  TRANSPORTS,
} from '@pglog/common/api/postgres-target.ts';

import type { Obj } from './field-checks.ts';
import { DNS1123_LABEL, DNS1123_SUBDOMAIN, FieldChecks } from './field-checks.ts';
import type { FieldPath } from './field-path.ts';
import { describe } from './field-path.ts';

const TOP_FIELDS = ['apiVersion', 'kind', 'metadata', 'spec'] as const;
const METADATA_FIELDS = ['name', 'namespace', 'labels', 'annotations'] as const;
const SPEC_FIELDS = ['host', 'port', 'user', 'ssh', 'pool', 'transport', 'startAt', 'instances', 'collect'] as const;
const SSH_FIELDS = ['privateKeyFile', 'knownHostsFile', 'secretRef'] as const;
const SECRET_REF_FIELDS = ['name'] as const;
const INSTANCE_FIELDS = ['name', 'dataDirectory', 'logDirectory', 'logFormat', 'logLinePrefix', 'startAt', 'encodings', 'sql'] as const;
const ENCODINGS_FIELDS = ['default', 'databases'] as const;
const SQL_FIELDS = ['socketDirectory', 'port', 'database', 'user', 'timeoutSeconds', 'allowSuperuser'] as const;
const COLLECT_FIELDS = ['logs', 'activity', 'locks', 'statements', 'databases', 'intervalSeconds', 'statisticsIntervalSeconds'] as const;

/** The optional fields that were given: an absent one stays absent rather than undefined. */
function present<T extends Record<string, unknown>>(fields: T): { [K in keyof T]?: Exclude<T[K], undefined> } {
  return Object.fromEntries(Object.entries(fields).filter(([, v]) => v !== undefined)) as { [K in keyof T]?: Exclude<T[K], undefined> };
}

/** Validates and normalizes one document; problems carry field paths relative to the document. */
export class DocumentValidator extends FieldChecks {
  /** The object's valid metadata, kept even when other fields are invalid (for duplicate names). */
  metadata: TargetMetadata | undefined;
  private readonly mode: TargetsMode;

  constructor(mode: TargetsMode, baseDir: string) {
    super(baseDir);
    this.mode = mode;
  }

  target(value: unknown): PostgresTarget | undefined {
    const o = this.mapping(value, [], `expected a mapping (a ${TARGET_KIND} object)`);
    if (o === undefined) return undefined;
    if (Object.hasOwn(o, 'status')) this.fail(['status'], 'status is written by pglog, not read from the targets file; remove it');
    this.fields(o, [], TOP_FIELDS, ['status']);
    const apiVersion = this.required(o, 'apiVersion', [], (v, p) => this.exact(v, p, API_VERSION));
    const kind = this.required(o, 'kind', [], (v, p) => this.exact(v, p, TARGET_KIND));
    const metadata = this.required(o, 'metadata', [], (v, p) => this.objectMetadata(v, p));
    this.metadata = metadata;
    const spec = this.required(o, 'spec', [], (v, p) => this.spec(v, p));
    if (apiVersion === undefined || kind === undefined || metadata === undefined || spec === undefined) return undefined;
    return { apiVersion: API_VERSION, kind: TARGET_KIND, metadata, spec };
  }

  private objectMetadata(value: unknown, p: FieldPath): TargetMetadata | undefined {
    const o = this.object(value, p, METADATA_FIELDS);
    if (o === undefined) return undefined;
    const name = this.required(o, 'name', p, (v, q) => this.dnsLabel(v, q));
    const namespace = this.optional(o, 'namespace', p, (v, q) => this.dnsLabel(v, q));
    const labels = this.optional(o, 'labels', p, (v, q) => this.stringMap(v, q, true));
    const annotations = this.optional(o, 'annotations', p, (v, q) => this.stringMap(v, q, false));
    if (name === undefined) return undefined;
    return { name, ...present({ namespace, labels, annotations }) };
  }

  private spec(value: unknown, p: FieldPath): PostgresTargetSpec | undefined {
    const o = this.object(value, p, SPEC_FIELDS);
    if (o === undefined) return undefined;
    const host = this.required(o, 'host', p, (v, q) => this.host(v, q));
    const port = this.defaulted(o, 'port', p, TARGET_DEFAULTS.port, (v, q) => this.port(v, q));
    const user = this.required(o, 'user', p, (v, q) => this.sshUser(v, q));
    const ssh = this.required(o, 'ssh', p, (v, q) => this.ssh(v, q));
    const pool = this.optional(o, 'pool', p, (v, q) => this.dnsLabel(v, q));
    const transport = this.defaulted(o, 'transport', p, TARGET_DEFAULTS.transport, (v, q) => this.oneOf(v, q, TRANSPORTS));
    const startAt = this.optional(o, 'startAt', p, (v, q) => this.oneOf(v, q, START_POINTS));
    const instances = this.required(o, 'instances', p, (v, q) => this.instances(v, q, user ?? ''));
    const collect = this.defaulted(o, 'collect', p, { ...TARGET_DEFAULTS.collect }, (v, q) => this.collect(v, q));
    if (
      host === undefined ||
      port === undefined ||
      user === undefined ||
      ssh === undefined ||
      transport === undefined ||
      instances === undefined ||
      collect === undefined ||
      (Object.hasOwn(o, 'startAt') && startAt === undefined)
    )
      return undefined;
    return { host, port, user, ssh, transport, instances, collect, ...present({ pool, startAt }) };
  }

  private ssh(value: unknown, p: FieldPath): SshCredentials | undefined {
    const o = this.object(value, p, SSH_FIELDS);
    if (o === undefined) return undefined;
    const files = Object.hasOwn(o, 'privateKeyFile') || Object.hasOwn(o, 'knownHostsFile');
    const secret = Object.hasOwn(o, 'secretRef');
    if (files && secret) return this.fail(p, 'give either privateKeyFile and knownHostsFile, or secretRef, not both');
    if (this.mode === 'standalone') {
      if (secret)
        return this.fail(
          [...p, 'secretRef'],
          'a Secret can only be used in the cluster; in a targets file give privateKeyFile and knownHostsFile (paths relative to the targets file)',
        );
      const privateKeyFile = this.required(o, 'privateKeyFile', p, (v, q) => this.localPath(v, q));
      const knownHostsFile = this.required(o, 'knownHostsFile', p, (v, q) => this.localPath(v, q));
      if (privateKeyFile === undefined || knownHostsFile === undefined) return undefined;
      return { privateKeyFile, knownHostsFile };
    }
    if (files)
      return this.fail(p, 'key files cannot be used in the cluster; give secretRef: {name: SECRET} (a Secret with id_ed25519 or id_rsa, and known_hosts)');
    const secretRef = this.required(o, 'secretRef', p, (v, q) => {
      const r = this.object(v, q, SECRET_REF_FIELDS);
      if (r === undefined) return undefined;
      const name = this.required(r, 'name', q, (w, s) =>
        this.pattern(w, s, DNS1123_SUBDOMAIN, 253, 'a DNS-1123 subdomain (lower-case letters, digits, "-" and ".")'),
      );
      return name === undefined ? undefined : { name };
    });
    return secretRef === undefined ? undefined : { secretRef };
  }

  private instances(value: unknown, p: FieldPath, user: string): PostgresInstance[] | undefined {
    if (!Array.isArray(value)) return this.fail(p, `expected a list of instances, got ${describe(value)}`);
    if (value.length === 0) return this.fail(p, 'at least one instance is required');
    const out: PostgresInstance[] = [];
    const names = new Map<string, number>();
    let ok = true;
    value.forEach((item: unknown, i) => {
      const instance = this.instance(item, [...p, i], user);
      if (instance === undefined) ok = false;
      else out.push(instance);
      // Checked on the name alone, so a duplicate is reported even when the rest is invalid.
      const name: unknown = typeof item === 'object' && item !== null ? (item as Obj)['name'] : undefined;
      if (typeof name !== 'string' || !DNS1123_LABEL.test(name)) return;
      const first = names.get(name);
      if (first === undefined) {
        names.set(name, i);
        return;
      }
      ok = false;
      this.fail([...p, i, 'name'], `duplicate instance name ${JSON.stringify(name)}: instances[${first}] has it too`);
    });
    return ok ? out : undefined;
  }

  private instance(value: unknown, p: FieldPath, user: string): PostgresInstance | undefined {
    const o = this.object(value, p, INSTANCE_FIELDS);
    if (o === undefined) return undefined;
    const name = this.required(o, 'name', p, (v, q) => this.dnsLabel(v, q));
    const dataDirectory = this.required(o, 'dataDirectory', p, (v, q) => this.remotePath(v, q, undefined));
    const logDirectory = this.defaulted(o, 'logDirectory', p, TARGET_DEFAULTS.logDirectory, (v, q) => this.remotePath(v, q, dataDirectory ?? '/'));
    const logFormat = this.defaulted(o, 'logFormat', p, TARGET_DEFAULTS.logFormat, (v, q) => this.oneOf(v, q, LOG_FORMATS));
    const logLinePrefix = this.defaulted(o, 'logLinePrefix', p, TARGET_DEFAULTS.logLinePrefix, (v, q) => this.prefix(v, q));
    const startAt = this.optional(o, 'startAt', p, (v, q) => this.oneOf(v, q, START_POINTS));
    const encodings = this.defaulted(o, 'encodings', p, { default: TARGET_DEFAULTS.defaultEncoding, databases: {} }, (v, q) => this.encodings(v, q));
    const sql = this.optional(o, 'sql', p, (v, q) => this.sql(v, q, user));
    if (
      name === undefined ||
      dataDirectory === undefined ||
      logDirectory === undefined ||
      logFormat === undefined ||
      logLinePrefix === undefined ||
      encodings === undefined ||
      (Object.hasOwn(o, 'sql') && sql === undefined) ||
      (Object.hasOwn(o, 'startAt') && startAt === undefined)
    )
      return undefined;
    return {
      name,
      dataDirectory,
      // The default `log` is relative to the data directory, which was unknown above.
      logDirectory: Object.hasOwn(o, 'logDirectory') ? logDirectory : path.posix.resolve(dataDirectory, logDirectory),
      logFormat,
      logLinePrefix,
      encodings,
      sql: sql ?? this.sqlDefaults(user),
      ...present({ startAt }),
    };
  }

  private encodings(value: unknown, p: FieldPath): InstanceEncodings | undefined {
    const o = this.object(value, p, ENCODINGS_FIELDS);
    if (o === undefined) return undefined;
    const def = this.defaulted(o, 'default', p, TARGET_DEFAULTS.defaultEncoding, (v, q) => this.encoding(v, q));
    const databases = this.defaulted(o, 'databases', p, {}, (v, q) => {
      const m = this.mapping(v, q, 'expected a mapping of database name to encoding');
      if (m === undefined) return undefined;
      const out: Record<string, string> = {};
      let ok = true;
      for (const [db, enc] of Object.entries(m)) {
        const e = db === '' ? this.fail([...q, db], 'empty database name') : this.encoding(enc, [...q, db]);
        if (e === undefined) ok = false;
        else setOwn(out, db, e);
      }
      return ok ? out : undefined;
    });
    if (def === undefined || databases === undefined) return undefined;
    return { default: def, databases };
  }

  private sqlDefaults(user: string): InstanceSql {
    return {
      socketDirectory: TARGET_DEFAULTS.sqlSocketDirectory,
      port: TARGET_DEFAULTS.sqlPort,
      database: TARGET_DEFAULTS.sqlDatabase,
      user,
      timeoutSeconds: TARGET_DEFAULTS.sqlTimeoutSeconds,
      allowSuperuser: TARGET_DEFAULTS.sqlAllowSuperuser,
    };
  }

  private sql(value: unknown, p: FieldPath, user: string): InstanceSql | undefined {
    const o = this.object(value, p, SQL_FIELDS);
    if (o === undefined) return undefined;
    const d = this.sqlDefaults(user);
    const socketDirectory = this.defaulted(o, 'socketDirectory', p, d.socketDirectory, (v, q) => this.remotePath(v, q, undefined));
    const port = this.defaulted(o, 'port', p, d.port, (v, q) => this.port(v, q));
    const database = this.defaulted(o, 'database', p, d.database, (v, q) => this.name(v, q));
    const sqlUser = this.defaulted(o, 'user', p, d.user, (v, q) => this.name(v, q));
    const timeoutSeconds = this.defaulted(o, 'timeoutSeconds', p, d.timeoutSeconds, (v, q) =>
      this.wholeNumber(v, q, SQL_TIMEOUT_BOUNDS.min, SQL_TIMEOUT_BOUNDS.max),
    );
    const allowSuperuser = this.defaulted(o, 'allowSuperuser', p, d.allowSuperuser, (v, q) => this.boolean(v, q));
    if (
      socketDirectory === undefined ||
      port === undefined ||
      database === undefined ||
      sqlUser === undefined ||
      timeoutSeconds === undefined ||
      allowSuperuser === undefined
    )
      return undefined;
    return { socketDirectory, port, database, user: sqlUser, timeoutSeconds, allowSuperuser };
  }

  private collect(value: unknown, p: FieldPath): TargetCollect | undefined {
    const o = this.object(value, p, COLLECT_FIELDS);
    if (o === undefined) return undefined;
    const d = TARGET_DEFAULTS.collect;
    const logs = this.defaulted(o, 'logs', p, d.logs, (v, q) => this.boolean(v, q));
    const activity = this.defaulted(o, 'activity', p, d.activity, (v, q) => this.boolean(v, q));
    const locks = this.defaulted(o, 'locks', p, d.locks, (v, q) => this.boolean(v, q));
    const statements = this.defaulted(o, 'statements', p, d.statements, (v, q) => this.boolean(v, q));
    const databases = this.defaulted(o, 'databases', p, d.databases, (v, q) => this.boolean(v, q));
    const { min, max } = SNAPSHOT_INTERVAL_BOUNDS;
    const intervalSeconds = this.defaulted(o, 'intervalSeconds', p, d.intervalSeconds, (v, q) => this.wholeNumber(v, q, min, max));
    const statisticsIntervalSeconds = this.defaulted(o, 'statisticsIntervalSeconds', p, d.statisticsIntervalSeconds, (v, q) =>
      this.wholeNumber(v, q, min, max),
    );
    if (
      logs === undefined ||
      activity === undefined ||
      locks === undefined ||
      statements === undefined ||
      databases === undefined ||
      intervalSeconds === undefined ||
      statisticsIntervalSeconds === undefined
    )
      return undefined;
    const collect: TargetCollect = { logs, activity, locks, statements, databases, intervalSeconds, statisticsIntervalSeconds };
    if (!logs && !takesSnapshots(collect)) return this.fail(p, 'nothing to collect: logs, activity, locks, statements and databases are all false');
    return collect;
  }
}

/** `o[key] = value` that also works for a database named `__proto__`. */
function setOwn(o: Record<string, string>, key: string, value: string): void {
  Object.defineProperty(o, key, { value, enumerable: true, writable: true, configurable: true });
}
