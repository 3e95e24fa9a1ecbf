/**
 * The standalone targets file: a YAML stream of `PostgresTarget` objects, read and validated
 * once at start-up (`pglog collect --targets FILE`). Reference: docs/targets.md.
 *
 * Validation is hand-written and strict: wrong types, values out of range, missing required
 * fields and unknown fields (with a "did you mean" hint for typos) are all errors. Every
 * problem in the file is collected and reported together in one PglogError('CONFIG_INVALID'),
 * one line per problem:
 *
 *     FILE: document N (PostgresTarget/NAME): spec.instances[0].logFormat: expected one of stderr, csvlog, jsonlog, got "csv" (line 17)
 *
 * YAML syntax errors are reported as `FILE:LINE:COLUMN: document N: YAML syntax error: ...`.
 * Messages name fields and show short scalar values, never whole documents.
 *
 * The result is normalized: defaults applied, encodings canonical, `logDirectory` an absolute
 * path on the server, and (standalone) key file paths absolute on this machine, resolved
 * against the directory of the targets file.
 */
import { isUtf8 } from 'node:buffer';
import { readFile } from 'node:fs/promises';
import { isIP } from 'node:net';
import path from 'node:path';
import { LineCounter, parseAllDocuments } from 'yaml';
import type { Document } from 'yaml';
import { PglogError } from '../errors.ts';
import { canonicalEncoding } from '../protocol/decode.ts';
import { compilePrefix } from '../protocol/prefix.ts';
import {
  API_VERSION, LOG_FORMATS, TARGET_DEFAULTS, TARGET_KIND, TRANSPORTS,
} from './target-types.ts';
import type {
  InstanceEncodings, InstanceSql, PostgresInstance, PostgresTarget, PostgresTargetSpec,
  SshCredentials, TargetCollect, TargetMetadata, TargetsMode,
} from './target-types.ts';

export interface TargetsFileOptions {
  /**
   * `standalone` (default): SSH credentials are key files, resolved against the file's
   * directory. `cluster`: SSH credentials are a Secret reference.
   */
  mode?: TargetsMode;
}

/** At most this many problems are listed; the rest are counted. */
const MAX_PROBLEMS = 100;

/**
 * Reads and validates a targets file. Throws PglogError('INPUT_UNREADABLE') when the file
 * cannot be read or is not UTF-8, PglogError('CONFIG_INVALID') listing every problem.
 */
export async function loadTargetsFile(file: string, options?: TargetsFileOptions): Promise<PostgresTarget[]> {
  let bytes: Buffer;
  try {
    bytes = await readFile(file);
  } catch (e) {
    const why = e instanceof Error && 'code' in e && typeof e.code === 'string' ? e.code : String(e);
    throw new PglogError('INPUT_UNREADABLE', `${file}: cannot read the targets file (${why})`, { cause: e });
  }
  if (!isUtf8(bytes)) throw new PglogError('INPUT_UNREADABLE', `${file}: the targets file is not valid UTF-8`);
  return parseTargetsFile(bytes.toString('utf8'), file, options);
}

/**
 * Parses and validates the text of a targets file (a YAML stream; empty documents are
 * skipped). `file` names the file in messages and is the base of relative key file paths.
 * Returns the targets in file order, normalized; throws PglogError('CONFIG_INVALID') listing
 * every problem found.
 */
export function parseTargetsFile(text: string, file: string, options?: TargetsFileOptions): PostgresTarget[] {
  const mode = options?.mode ?? 'standalone';
  const baseDir = path.dirname(path.resolve(file));
  const lines = new LineCounter();
  const docs = parseAllDocuments(text, { lineCounter: lines, prettyErrors: false });
  const problems: string[] = [];
  const targets: PostgresTarget[] = [];
  /** `namespace/name` → number of the document that declared it first. */
  const seen = new Map<string, number>();

  docs.forEach((doc, i) => {
    const n = i + 1;
    const yamlErrors = [...doc.errors, ...doc.warnings];
    if (yamlErrors.length > 0) {
      for (const e of yamlErrors) {
        const { line, col } = lines.linePos(e.pos[0]);
        problems.push(`${file}:${line}:${col}: document ${n}: YAML syntax error: ${e.message}`);
      }
      return;
    }
    const value: unknown = doc.toJS({ maxAliasCount: 100 });
    if (value === null || value === undefined) return; // an empty document
    const v = new DocumentValidator(mode, baseDir);
    const target = v.target(value);
    const label = `${TARGET_KIND}/${objectName(value)}`;
    if (v.metadata !== undefined) {
      const { name, namespace } = v.metadata;
      const key = `${namespace ?? ''}/${name}`;
      const first = seen.get(key);
      if (first === undefined) seen.set(key, n);
      else v.fail(['metadata', 'name'], `duplicate name ${JSON.stringify(name)}${namespace !== undefined ? ` in namespace ${namespace}` : ''}: document ${first} has it too`);
    }
    // In the order of the file, so the list reads top-down (the sort is stable).
    const located = v.problems.map((p) => ({ ...p, line: fieldLine(doc, lines, p.path) }));
    located.sort((a, b) => a.line - b.line);
    for (const p of located) {
      problems.push(`${file}: document ${n} (${label}): ${formatPath(p.path)}: ${p.message}${p.line > 0 ? ` (line ${p.line})` : ''}`);
    }
    if (target !== undefined && v.problems.length === 0) targets.push(target);
  });

  if (problems.length === 0 && targets.length === 0) problems.push(`${file}: no ${TARGET_KIND} objects in the file`);
  if (problems.length > 0) {
    const shown = problems.slice(0, MAX_PROBLEMS);
    if (problems.length > MAX_PROBLEMS) shown.push(`${file}: ... and ${problems.length - MAX_PROBLEMS} more problems`);
    throw new PglogError('CONFIG_INVALID', shown.join('\n'));
  }
  return targets;
}

type PathSegment = string | number;
type FieldPath = readonly PathSegment[];
type Obj = Record<string, unknown>;

interface Problem {
  path: FieldPath;
  message: string;
}

const TOP_FIELDS = ['apiVersion', 'kind', 'metadata', 'spec'] as const;
const METADATA_FIELDS = ['name', 'namespace', 'labels', 'annotations'] as const;
const SPEC_FIELDS = ['host', 'port', 'user', 'ssh', 'pool', 'transport', 'instances', 'collect'] as const;
const SSH_FIELDS = ['privateKeyFile', 'knownHostsFile', 'secretRef'] as const;
const SECRET_REF_FIELDS = ['name'] as const;
const INSTANCE_FIELDS = ['name', 'dataDirectory', 'logDirectory', 'logFormat', 'logLinePrefix', 'encodings', 'sql'] as const;
const ENCODINGS_FIELDS = ['default', 'databases'] as const;
const SQL_FIELDS = ['socketDirectory', 'port', 'database', 'user'] as const;
const COLLECT_FIELDS = ['logs', 'activity', 'locks', 'statements'] as const;

const DNS1123_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const DNS1123_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const HOSTNAME_LABEL = /^[A-Za-z0-9]([-A-Za-z0-9]{0,61}[A-Za-z0-9])?$/;
const LABEL_NAME = /^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/;
const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f]/;

/** Validates and normalizes one document; problems carry field paths relative to the document. */
class DocumentValidator {
  readonly problems: Problem[] = [];
  /** The object's valid metadata, kept even when other fields are invalid (for duplicate names). */
  metadata: TargetMetadata | undefined;
  private readonly mode: TargetsMode;
  private readonly baseDir: string;

  constructor(mode: TargetsMode, baseDir: string) {
    this.mode = mode;
    this.baseDir = baseDir;
  }

  fail(p: FieldPath, message: string): undefined {
    this.problems.push({ path: p, message });
    return undefined;
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
    const o = this.mapping(value, p);
    if (o === undefined) return undefined;
    this.fields(o, p, METADATA_FIELDS);
    const name = this.required(o, 'name', p, (v, q) => this.dnsLabel(v, q));
    const namespace = this.optional(o, 'namespace', p, (v, q) => this.dnsLabel(v, q));
    const labels = this.optional(o, 'labels', p, (v, q) => this.stringMap(v, q, true));
    const annotations = this.optional(o, 'annotations', p, (v, q) => this.stringMap(v, q, false));
    if (name === undefined) return undefined;
    const m: TargetMetadata = { name };
    if (namespace !== undefined) m.namespace = namespace;
    if (labels !== undefined) m.labels = labels;
    if (annotations !== undefined) m.annotations = annotations;
    return m;
  }

  private spec(value: unknown, p: FieldPath): PostgresTargetSpec | undefined {
    const o = this.mapping(value, p);
    if (o === undefined) return undefined;
    this.fields(o, p, SPEC_FIELDS);
    const host = this.required(o, 'host', p, (v, q) => this.host(v, q));
    const port = this.defaulted(o, 'port', p, TARGET_DEFAULTS.port, (v, q) => this.port(v, q));
    const user = this.required(o, 'user', p, (v, q) => this.name(v, q));
    const ssh = this.required(o, 'ssh', p, (v, q) => this.ssh(v, q));
    const pool = this.optional(o, 'pool', p, (v, q) => this.dnsLabel(v, q));
    const transport = this.defaulted(o, 'transport', p, TARGET_DEFAULTS.transport, (v, q) => this.oneOf(v, q, TRANSPORTS));
    const instances = this.required(o, 'instances', p, (v, q) => this.instances(v, q, user ?? ''));
    const collect = this.defaulted(o, 'collect', p, { ...TARGET_DEFAULTS.collect }, (v, q) => this.collect(v, q));
    if (host === undefined || port === undefined || user === undefined || ssh === undefined || transport === undefined ||
        instances === undefined || collect === undefined) return undefined;
    const spec: PostgresTargetSpec = { host, port, user, ssh, transport, instances, collect };
    if (pool !== undefined) spec.pool = pool;
    return spec;
  }

  private ssh(value: unknown, p: FieldPath): SshCredentials | undefined {
    const o = this.mapping(value, p);
    if (o === undefined) return undefined;
    this.fields(o, p, SSH_FIELDS);
    const files = Object.hasOwn(o, 'privateKeyFile') || Object.hasOwn(o, 'knownHostsFile');
    const secret = Object.hasOwn(o, 'secretRef');
    if (files && secret) return this.fail(p, 'give either privateKeyFile and knownHostsFile, or secretRef, not both');
    if (this.mode === 'standalone') {
      if (secret) return this.fail([...p, 'secretRef'], 'a Secret can only be used in the cluster; in a targets file give privateKeyFile and knownHostsFile (paths relative to the targets file)');
      const privateKeyFile = this.required(o, 'privateKeyFile', p, (v, q) => this.localPath(v, q));
      const knownHostsFile = this.required(o, 'knownHostsFile', p, (v, q) => this.localPath(v, q));
      if (privateKeyFile === undefined || knownHostsFile === undefined) return undefined;
      return { privateKeyFile, knownHostsFile };
    }
    if (files) return this.fail(p, 'key files cannot be used in the cluster; give secretRef: {name: SECRET} (a Secret with id_ed25519 or id_rsa, and known_hosts)');
    const secretRef = this.required(o, 'secretRef', p, (v, q) => {
      const r = this.mapping(v, q);
      if (r === undefined) return undefined;
      this.fields(r, q, SECRET_REF_FIELDS);
      const name = this.required(r, 'name', q, (w, s) => this.pattern(w, s, DNS1123_SUBDOMAIN, 253, 'a DNS-1123 subdomain (lower-case letters, digits, "-" and ".")'));
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
    const o = this.mapping(value, p);
    if (o === undefined) return undefined;
    this.fields(o, p, INSTANCE_FIELDS);
    const name = this.required(o, 'name', p, (v, q) => this.dnsLabel(v, q));
    const dataDirectory = this.required(o, 'dataDirectory', p, (v, q) => this.remotePath(v, q, undefined));
    const logDirectory = this.defaulted(o, 'logDirectory', p, TARGET_DEFAULTS.logDirectory, (v, q) => this.remotePath(v, q, dataDirectory ?? '/'));
    const logFormat = this.defaulted(o, 'logFormat', p, TARGET_DEFAULTS.logFormat, (v, q) => this.oneOf(v, q, LOG_FORMATS));
    const logLinePrefix = this.defaulted(o, 'logLinePrefix', p, TARGET_DEFAULTS.logLinePrefix, (v, q) => this.prefix(v, q));
    const encodings = this.defaulted(o, 'encodings', p, { default: TARGET_DEFAULTS.defaultEncoding, databases: {} }, (v, q) => this.encodings(v, q));
    const sql = this.optional(o, 'sql', p, (v, q) => this.sql(v, q, user));
    if (name === undefined || dataDirectory === undefined || logDirectory === undefined || logFormat === undefined ||
        logLinePrefix === undefined || encodings === undefined || (Object.hasOwn(o, 'sql') && sql === undefined)) return undefined;
    return {
      name, dataDirectory,
      // The default `log` is relative to the data directory, which was unknown above.
      logDirectory: Object.hasOwn(o, 'logDirectory') ? logDirectory : path.posix.resolve(dataDirectory, logDirectory),
      logFormat, logLinePrefix, encodings,
      sql: sql ?? this.sqlDefaults(user),
    };
  }

  private encodings(value: unknown, p: FieldPath): InstanceEncodings | undefined {
    const o = this.mapping(value, p);
    if (o === undefined) return undefined;
    this.fields(o, p, ENCODINGS_FIELDS);
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
    return { socketDirectory: TARGET_DEFAULTS.sqlSocketDirectory, port: TARGET_DEFAULTS.sqlPort, database: TARGET_DEFAULTS.sqlDatabase, user };
  }

  private sql(value: unknown, p: FieldPath, user: string): InstanceSql | undefined {
    const o = this.mapping(value, p);
    if (o === undefined) return undefined;
    this.fields(o, p, SQL_FIELDS);
    const d = this.sqlDefaults(user);
    const socketDirectory = this.defaulted(o, 'socketDirectory', p, d.socketDirectory, (v, q) => this.remotePath(v, q, undefined));
    const port = this.defaulted(o, 'port', p, d.port, (v, q) => this.port(v, q));
    const database = this.defaulted(o, 'database', p, d.database, (v, q) => this.name(v, q));
    const sqlUser = this.defaulted(o, 'user', p, d.user, (v, q) => this.name(v, q));
    if (socketDirectory === undefined || port === undefined || database === undefined || sqlUser === undefined) return undefined;
    return { socketDirectory, port, database, user: sqlUser };
  }

  private collect(value: unknown, p: FieldPath): TargetCollect | undefined {
    const o = this.mapping(value, p);
    if (o === undefined) return undefined;
    this.fields(o, p, COLLECT_FIELDS);
    const d = TARGET_DEFAULTS.collect;
    const logs = this.defaulted(o, 'logs', p, d.logs, (v, q) => this.boolean(v, q));
    const activity = this.defaulted(o, 'activity', p, d.activity, (v, q) => this.boolean(v, q));
    const locks = this.defaulted(o, 'locks', p, d.locks, (v, q) => this.boolean(v, q));
    const statements = this.defaulted(o, 'statements', p, d.statements, (v, q) => this.boolean(v, q));
    if (logs === undefined || activity === undefined || locks === undefined || statements === undefined) return undefined;
    if (!logs && !activity && !locks && !statements) return this.fail(p, 'nothing to collect: logs, activity, locks and statements are all false');
    return { logs, activity, locks, statements };
  }

  // --- field access ------------------------------------------------------------------------

  /** Reports every key of `o` not in `allowed` (keys in `skip` are reported elsewhere). */
  private fields(o: Obj, p: FieldPath, allowed: readonly string[], skip: readonly string[] = []): void {
    for (const key of Object.keys(o)) {
      if (allowed.includes(key) || skip.includes(key)) continue;
      const hint = closest(key, allowed);
      this.fail([...p, key], hint !== undefined ? `unknown field; did you mean ${hint}?` : `unknown field; expected one of ${allowed.join(', ')}`);
    }
  }

  private required<T>(o: Obj, key: string, p: FieldPath, check: (v: unknown, p: FieldPath) => T | undefined): T | undefined {
    if (!Object.hasOwn(o, key)) return this.fail([...p, key], 'required field is missing');
    return check(o[key], [...p, key]);
  }

  private optional<T>(o: Obj, key: string, p: FieldPath, check: (v: unknown, p: FieldPath) => T | undefined): T | undefined {
    return Object.hasOwn(o, key) ? check(o[key], [...p, key]) : undefined;
  }

  private defaulted<T>(o: Obj, key: string, p: FieldPath, def: T, check: (v: unknown, p: FieldPath) => T | undefined): T | undefined {
    return Object.hasOwn(o, key) ? check(o[key], [...p, key]) : def;
  }

  // --- value checks (each reports its own problem and returns undefined on failure) ---------

  private mapping(value: unknown, p: FieldPath, expected = 'expected a mapping'): Obj | undefined {
    if (typeof value === 'object' && value !== null && !Array.isArray(value) && Object.getPrototypeOf(value) === Object.prototype) return value as Obj;
    return this.fail(p, `${expected}, got ${describe(value)}`);
  }

  private string(value: unknown, p: FieldPath): string | undefined {
    if (typeof value !== 'string') return this.fail(p, `expected a string, got ${describe(value)}`);
    if (value === '') return this.fail(p, 'must not be empty');
    return value;
  }

  private exact(value: unknown, p: FieldPath, expected: string): string | undefined {
    if (value !== expected) return this.fail(p, `expected ${JSON.stringify(expected)}, got ${describe(value)}`);
    return expected;
  }

  private oneOf<T extends string>(value: unknown, p: FieldPath, allowed: readonly T[]): T | undefined {
    if (typeof value === 'string' && (allowed as readonly string[]).includes(value)) return value as T;
    return this.fail(p, `expected one of ${allowed.join(', ')}, got ${describe(value)}`);
  }

  private boolean(value: unknown, p: FieldPath): boolean | undefined {
    if (typeof value === 'boolean') return value;
    return this.fail(p, `expected true or false, got ${describe(value)}`);
  }

  private port(value: unknown, p: FieldPath): number | undefined {
    if (typeof value === 'number' && Number.isInteger(value) && value >= 1 && value <= 65535) return value;
    return this.fail(p, `expected an integer from 1 to 65535, got ${describe(value)}`);
  }

  private pattern(value: unknown, p: FieldPath, re: RegExp, max: number, what: string): string | undefined {
    const s = this.string(value, p);
    if (s === undefined) return undefined;
    if (s.length > max || !re.test(s)) return this.fail(p, `expected ${what}, at most ${max} characters, got ${describe(s)}`);
    return s;
  }

  private dnsLabel(value: unknown, p: FieldPath): string | undefined {
    return this.pattern(value, p, DNS1123_LABEL, 63, 'a DNS-1123 label (lower-case letters, digits and "-", starting and ending with a letter or digit)');
  }

  /** A user, role or database name: any non-empty text without whitespace or control characters. */
  private name(value: unknown, p: FieldPath): string | undefined {
    const s = this.string(value, p);
    if (s === undefined) return undefined;
    if (/\s/.test(s) || CONTROL.test(s)) return this.fail(p, `must not contain whitespace or control characters, got ${describe(s)}`);
    return s;
  }

  private host(value: unknown, p: FieldPath): string | undefined {
    const s = this.string(value, p);
    if (s === undefined) return undefined;
    if (isIP(s) !== 0) return s;
    const labels = (s.endsWith('.') ? s.slice(0, -1) : s).split('.');
    const hostname = s.length <= 253 && labels.every((l) => HOSTNAME_LABEL.test(l));
    // All-numeric names are malformed IPv4 addresses (999.0.0.1), not host names.
    if (!hostname || labels.every((l) => /^\d+$/.test(l))) return this.fail(p, `expected a host name or an IP address, got ${describe(s)}`);
    return s;
  }

  /** A path on the server: absolute, or (with `base`) relative to `base`; normalized. */
  private remotePath(value: unknown, p: FieldPath, base: string | undefined): string | undefined {
    const s = this.string(value, p);
    if (s === undefined) return undefined;
    if (CONTROL.test(s)) return this.fail(p, 'must not contain control characters');
    if (base === undefined && !s.startsWith('/')) return this.fail(p, `expected an absolute path on the server, got ${describe(s)}`);
    return path.posix.resolve(base ?? '/', s);
  }

  /** A path on this machine: relative ones are resolved against the targets file's directory. */
  private localPath(value: unknown, p: FieldPath): string | undefined {
    const s = this.string(value, p);
    if (s === undefined) return undefined;
    if (CONTROL.test(s)) return this.fail(p, 'must not contain control characters');
    if (s === '~' || s.startsWith('~/')) return this.fail(p, '"~" is not expanded; give an absolute path or one relative to the targets file');
    return path.resolve(this.baseDir, s);
  }

  private prefix(value: unknown, p: FieldPath): string | undefined {
    if (typeof value !== 'string') return this.fail(p, `expected a string, got ${describe(value)}`);
    try {
      compilePrefix(value);
    } catch (e) {
      return this.fail(p, e instanceof Error ? e.message : String(e));
    }
    return value;
  }

  private encoding(value: unknown, p: FieldPath): string | undefined {
    const s = this.string(value, p);
    if (s === undefined) return undefined;
    try {
      return canonicalEncoding(s);
    } catch (e) {
      return this.fail(p, e instanceof Error ? e.message : String(e));
    }
  }

  /** Labels (`labelValues`: Kubernetes label values) or annotations (any string values). */
  private stringMap(value: unknown, p: FieldPath, labelValues: boolean): Record<string, string> | undefined {
    const o = this.mapping(value, p);
    if (o === undefined) return undefined;
    const out: Record<string, string> = {};
    let ok = true;
    for (const [k, v] of Object.entries(o)) {
      const q = [...p, k];
      if (!qualifiedName(k)) {
        ok = false;
        this.fail(q, 'expected a key of the form [prefix/]name (name: at most 63 letters, digits, "-", "_" or ".", starting and ending with a letter or digit)');
        continue;
      }
      if (typeof v !== 'string') {
        ok = false;
        this.fail(q, `expected a string, got ${describe(v)}${typeof v === 'number' || typeof v === 'boolean' ? ' (quote it)' : ''}`);
        continue;
      }
      if (labelValues && (v.length > 63 || !LABEL_VALUE.test(v))) {
        ok = false;
        this.fail(q, `expected a label value (at most 63 letters, digits, "-", "_" or ".", starting and ending with a letter or digit), got ${describe(v)}`);
        continue;
      }
      out[k] = v;
    }
    return ok ? out : undefined;
  }
}

/** `o[key] = value` that also works for a database named `__proto__`. */
function setOwn(o: Record<string, string>, key: string, value: string): void {
  Object.defineProperty(o, key, { value, enumerable: true, writable: true, configurable: true });
}

/** A Kubernetes qualified name: `[DNS-1123 subdomain/]name`. */
function qualifiedName(key: string): boolean {
  const slash = key.indexOf('/');
  const prefix = slash < 0 ? undefined : key.slice(0, slash);
  const name = slash < 0 ? key : key.slice(slash + 1);
  if (prefix !== undefined && (prefix.length > 253 || !DNS1123_SUBDOMAIN.test(prefix))) return false;
  return name.length <= 63 && LABEL_NAME.test(name);
}

/** `spec.instances[0].encodings.databases["my db"]` */
function formatPath(p: FieldPath): string {
  if (p.length === 0) return '(document)';
  let s = '';
  for (const seg of p) {
    if (typeof seg === 'number') s += `[${seg}]`;
    else if (/^[A-Za-z_][A-Za-z0-9_-]*$/.test(seg)) s += s === '' ? seg : `.${seg}`;
    else s += `[${JSON.stringify(seg.length > 60 ? `${seg.slice(0, 60)}...` : seg)}]`;
  }
  return s;
}

/** Line of the field, or of its nearest parent that is in the document; 0 if unknown. */
function fieldLine(doc: Document.Parsed, lines: LineCounter, p: FieldPath): number {
  for (let n = p.length; n >= 0; n--) {
    const node: unknown = doc.getIn(p.slice(0, n), true);
    if (typeof node === 'object' && node !== null && 'range' in node && Array.isArray(node.range)) {
      const start: unknown = node.range[0];
      if (typeof start === 'number') return lines.linePos(start).line;
    }
  }
  return 0;
}

/** The object's name for messages: `metadata.name` when it is a short plain string, else `?`. */
function objectName(value: unknown): string {
  if (typeof value !== 'object' || value === null) return '?';
  const metadata: unknown = (value as Obj)['metadata'];
  if (typeof metadata !== 'object' || metadata === null) return '?';
  const name: unknown = (metadata as Obj)['name'];
  if (typeof name !== 'string' || name === '') return '?';
  return /^[A-Za-z0-9._-]{1,63}$/.test(name) ? name : describe(name);
}

/** A value as shown in a message: short scalars quoted, collections by their type only. */
function describe(value: unknown): string {
  if (value === null || value === undefined) return 'null';
  if (typeof value === 'string') return JSON.stringify(value.length > 60 ? `${value.slice(0, 60)}...` : value);
  if (typeof value === 'number' || typeof value === 'boolean' || typeof value === 'bigint') return String(value);
  if (Array.isArray(value)) return 'a list';
  if (typeof value === 'object' && Object.getPrototypeOf(value) === Object.prototype) return 'a mapping';
  return `a value of type ${typeof value === 'object' ? (value.constructor?.name ?? 'object') : typeof value}`;
}

/**
 * The allowed field a misspelt one most likely means: the closest by case-insensitive edit
 * distance if close enough, else the only one that contains it or is contained in it
 * (`knownHosts` → `knownHostsFile`, `prefix` → `logLinePrefix`).
 */
function closest(key: string, allowed: readonly string[]): string | undefined {
  const k = key.toLowerCase();
  let best: string | undefined;
  let bestDistance = Math.max(1, Math.floor(key.length / 3)) + 1;
  for (const a of allowed) {
    const d = editDistance(k, a.toLowerCase());
    if (d < bestDistance) {
      best = a;
      bestDistance = d;
    }
  }
  if (best !== undefined) return best;
  const containing = allowed.filter((a) => {
    const l = a.toLowerCase();
    return (k.length >= 4 && l.includes(k)) || (l.length >= 4 && k.includes(l));
  });
  return containing.length === 1 ? containing[0] : undefined;
}

/** Optimal string alignment distance (Levenshtein plus adjacent transpositions). */
function editDistance(a: string, b: string): number {
  const rows: number[][] = [];
  for (let i = 0; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++) {
      if (i === 0) {
        row.push(j);
        continue;
      }
      const prev = rows[i - 1] as number[];
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let d = Math.min((prev[j] as number) + 1, (row[j - 1] as number) + 1, (prev[j - 1] as number) + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) d = Math.min(d, ((rows[i - 2] as number[])[j - 2] as number) + 1);
      row.push(d);
    }
    rows.push(row);
  }
  return (rows[a.length] as number[])[b.length] as number;
}
