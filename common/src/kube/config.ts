/**
 * Where the API server is and how to authenticate: from kubeconfig files (merged as kubectl
 * merges $KUBECONFIG) or from the pod's service account (in cluster). Both take paths as arguments: the entry
 * point reads the environment, not this module.
 */
import { readFile } from 'node:fs/promises';
import { dirname, isAbsolute, resolve } from 'node:path';

import { parse } from 'yaml';

import { PglogError } from '../errors.ts';

export interface KubeConfig {
  /** https://host:port[/prefix] */
  server: string;
  /** PEM of the CA(s) that sign the server's certificate. */
  caCert?: string;
  /** Name to verify the server certificate against when it differs from the host in `server`. */
  tlsServerName?: string;
  token?: string;
  /** File holding the bearer token, re-read when it changes (projected service account tokens rotate). */
  tokenFile?: string;
  /** PEM client certificate and key. */
  clientCert?: string;
  clientKey?: string;
  insecureSkipTlsVerify?: boolean;
  /** An exec credential plugin that gives the bearer token (users[].user.exec). */
  exec?: ExecPlugin;
  /** The default namespace of the context, or the pod's namespace. */
  namespace?: string;
}

type Yaml = Record<string, unknown>;

function invalid(file: string, what: string, cause?: unknown): PglogError {
  return new PglogError('CONFIG_INVALID', `kubeconfig ${file}: ${what}`, cause === undefined ? undefined : { cause });
}

function isObject(v: unknown): v is Yaml {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function optionalString(file: string, where: string, o: Yaml, key: string): string | undefined {
  const v = o[key];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'string') throw invalid(file, `${where}.${key} must be a string`);
  return v;
}

async function readReferenced(file: string, where: string, path: string): Promise<string> {
  const full = isAbsolute(path) ? path : resolve(dirname(file), path);
  try {
    return await readFile(full, 'utf8');
  } catch (e) {
    throw invalid(file, `${where}: cannot read ${full}: ${(e as Error).message}`, e);
  }
}

/** PEM from `<key>-data` (base64) or from the file `<key>` names (relative to the kubeconfig). */
async function pem(file: string, where: string, o: Yaml, key: string): Promise<string | undefined> {
  const data = optionalString(file, where, o, `${key}-data`);
  if (data !== undefined) {
    const text = Buffer.from(data, 'base64').toString('utf8');
    if (!text.includes('-----BEGIN')) throw invalid(file, `${where}.${key}-data is not base64-encoded PEM`);
    return text;
  }
  const path = optionalString(file, where, o, key);
  return path === undefined ? undefined : readReferenced(file, `${where}.${key}`, path);
}

/** An exec credential plugin (`users[].user.exec`, client.authentication.k8s.io/v1). */
export interface ExecPlugin {
  /** The command, resolved: a relative path with a slash is taken from the kubeconfig's directory. */
  command: string;
  args: string[];
  /** The whole environment of the plugin: the caller's, then the kubeconfig's `env` entries. */
  env: Record<string, string>;
  apiVersion: string;
  /** `provideClusterInfo`: KUBERNETES_EXEC_INFO then carries the cluster's server and CA. */
  provideClusterInfo: boolean;
  installHint?: string;
  /** What the plugin is named in errors: `users[name=...] of FILE`. */
  source: string;
}

export const EXEC_API_VERSION = 'client.authentication.k8s.io/v1';

/** One entry of clusters/contexts/users, with the file it came from (relative paths resolve against it). */
interface Entry {
  body: Yaml;
  file: string;
}

/** The kubeconfig files merged as kubectl merges $KUBECONFIG: the first file that sets a value wins. */
interface Merged {
  files: string[];
  currentContext?: { name: string; file: string };
  clusters: Map<string, Entry>;
  contexts: Map<string, Entry>;
  users: Map<string, Entry>;
}

async function readKubeconfigDoc(path: string, mustExist: boolean): Promise<Yaml | null> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (e) {
    // kubectl skips the paths of $KUBECONFIG that do not exist; an explicit --kubeconfig must.
    if (!mustExist && (e as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw invalid(path, `cannot read: ${(e as Error).message}`, e);
  }
  let doc: unknown;
  try {
    doc = parse(text);
  } catch (e) {
    throw invalid(path, `not valid YAML: ${(e as Error).message}`, e);
  }
  if (doc === null || doc === undefined) return {};
  if (!isObject(doc)) throw invalid(path, 'not a mapping');
  return doc;
}

function mergeList(file: string, doc: Yaml, list: string, field: string, into: Map<string, Entry>): void {
  const entries = doc[list];
  if (entries === undefined || entries === null) return;
  if (!Array.isArray(entries)) throw invalid(file, `${list} is not a list`);
  for (const e of entries as unknown[]) {
    if (!isObject(e) || typeof e['name'] !== 'string') throw invalid(file, `an entry of ${list} has no name`);
    if (into.has(e['name'])) continue;
    const body = e[field];
    if (body !== undefined && body !== null && !isObject(body)) throw invalid(file, `${list}[name=${e['name']}].${field} must be a mapping`);
    into.set(e['name'], { body: isObject(body) ? body : {}, file });
  }
}

async function mergeFiles(paths: readonly string[], mustExist: boolean): Promise<Merged> {
  const merged: Merged = { files: [], clusters: new Map(), contexts: new Map(), users: new Map() };
  for (const path of paths) {
    const doc = await readKubeconfigDoc(path, mustExist);
    if (doc === null) continue;
    merged.files.push(path);
    const current = optionalString(path, 'kubeconfig', doc, 'current-context');
    if (merged.currentContext === undefined && current !== undefined && current !== '') merged.currentContext = { name: current, file: path };
    mergeList(path, doc, 'clusters', 'cluster', merged.clusters);
    mergeList(path, doc, 'contexts', 'context', merged.contexts);
    mergeList(path, doc, 'users', 'user', merged.users);
  }
  return merged;
}

function lookup(merged: Merged, list: 'clusters' | 'contexts' | 'users', name: string, referrer: string): Entry {
  const entry = merged[list].get(name);
  if (entry === undefined) throw invalid(referrer, `no entry named ${JSON.stringify(name)} in ${list}`);
  return entry;
}

/** Where the kubeconfig comes from: the files, in order, and the context (default: current-context). */
export interface KubeconfigSource {
  paths: readonly string[];
  context?: string;
  /** An explicit --kubeconfig must exist; the paths of $KUBECONFIG and ~/.kube/config may be missing. */
  mustExist?: boolean;
  /** The environment an exec plugin runs with (read by the entry point). */
  env?: Readonly<Record<string, string | undefined>>;
}

/**
 * Loads one context of a kubeconfig file (the current context unless `context` names one).
 * Supports bearer tokens (inline or `tokenFile`), client certificates, exec plugins, CA and server name.
 */
export function loadKubeconfigFile(path: string, context?: string): Promise<KubeConfig> {
  return loadKubeconfig({ paths: [path], mustExist: true, ...(context === undefined ? {} : { context }) });
}

/**
 * Loads one context of the kubeconfig files merged as kubectl merges them: for
 * current-context and for each named cluster, context and user, the first file that sets it wins.
 */
export async function loadKubeconfig(source: KubeconfigSource): Promise<KubeConfig> {
  const merged = await mergeFiles(source.paths, source.mustExist === true);
  const named = source.paths.join(':');
  if (merged.files.length === 0) throw invalid(named, 'none of these files exists');
  const contextName = source.context ?? merged.currentContext?.name;
  if (contextName === undefined || contextName === '') throw invalid(named, 'no context given and current-context is not set');
  const { body: ctx, file: ctxFile } = lookup(merged, 'contexts', contextName, merged.currentContext?.file ?? named);
  const where = `contexts[name=${contextName}].context`;
  const clusterName = optionalString(ctxFile, where, ctx, 'cluster');
  if (clusterName === undefined) throw invalid(ctxFile, `${where}.cluster is not set`);
  const { body: cluster, file: clusterFile } = lookup(merged, 'clusters', clusterName, ctxFile);
  const cwhere = `clusters[name=${clusterName}].cluster`;
  const server = optionalString(clusterFile, cwhere, cluster, 'server');
  if (server === undefined || server === '') throw invalid(clusterFile, `${cwhere}.server is not set`);
  let url: URL;
  try {
    url = new URL(server);
  } catch (e) {
    throw invalid(clusterFile, `${cwhere}.server ${JSON.stringify(server)} is not a URL`, e);
  }
  if (url.protocol !== 'https:') throw invalid(clusterFile, `${cwhere}.server must be an https:// URL (got ${url.protocol})`);
  const config: KubeConfig = { server };
  const caCert = await pem(clusterFile, cwhere, cluster, 'certificate-authority');
  if (caCert !== undefined) config.caCert = caCert;
  const tlsServerName = optionalString(clusterFile, cwhere, cluster, 'tls-server-name');
  if (tlsServerName !== undefined) config.tlsServerName = tlsServerName;
  const skip = cluster['insecure-skip-tls-verify'];
  if (skip !== undefined && typeof skip !== 'boolean') throw invalid(clusterFile, `${cwhere}.insecure-skip-tls-verify must be true or false`);
  if (skip === true) config.insecureSkipTlsVerify = true;

  const userName = optionalString(ctxFile, where, ctx, 'user');
  if (userName !== undefined && userName !== '') {
    const { body: user, file: userFile } = lookup(merged, 'users', userName, ctxFile);
    const uwhere = `users[name=${userName}].user`;
    const token = optionalString(userFile, uwhere, user, 'token');
    if (token !== undefined) config.token = token;
    const tokenFile = optionalString(userFile, uwhere, user, 'tokenFile');
    if (tokenFile !== undefined) config.tokenFile = isAbsolute(tokenFile) ? tokenFile : resolve(dirname(userFile), tokenFile);
    const clientCert = await pem(userFile, uwhere, user, 'client-certificate');
    const clientKey = await pem(userFile, uwhere, user, 'client-key');
    if ((clientCert === undefined) !== (clientKey === undefined)) throw invalid(userFile, `${uwhere}: client-certificate and client-key go together`);
    if (clientCert !== undefined && clientKey !== undefined) {
      config.clientCert = clientCert;
      config.clientKey = clientKey;
    }
    if (user['exec'] !== undefined && user['exec'] !== null && token === undefined && tokenFile === undefined) {
      config.exec = execPlugin(userFile, uwhere, user['exec'], source.env ?? {});
    }
    if (token === undefined && tokenFile === undefined && clientCert === undefined && config.exec === undefined) {
      for (const plugin of ['auth-provider', 'username']) {
        if (user[plugin] !== undefined)
          throw invalid(userFile, `${uwhere}.${plugin} is not supported: use a token, tokenFile, client certificate or exec plugin`);
      }
    }
  }
  const namespace = optionalString(ctxFile, where, ctx, 'namespace');
  if (namespace !== undefined && namespace !== '') config.namespace = namespace;
  return config;
}

function execPlugin(file: string, uwhere: string, raw: unknown, baseEnv: Readonly<Record<string, string | undefined>>): ExecPlugin {
  const where = `${uwhere}.exec`;
  if (!isObject(raw)) throw invalid(file, `${where} must be a mapping`);
  const command = optionalString(file, where, raw, 'command');
  if (command === undefined || command === '') throw invalid(file, `${where}.command is not set`);
  const apiVersion = optionalString(file, where, raw, 'apiVersion');
  if (apiVersion !== EXEC_API_VERSION) {
    throw invalid(file, `${where}.apiVersion ${JSON.stringify(apiVersion ?? '')} is not supported: only ${EXEC_API_VERSION}`);
  }
  const rawArgs = raw['args'] ?? [];
  if (!Array.isArray(rawArgs) || !rawArgs.every((a) => typeof a === 'string')) throw invalid(file, `${where}.args must be a list of strings`);
  const args: string[] = rawArgs;
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(baseEnv)) if (v !== undefined) env[k] = v;
  const extra = raw['env'] ?? [];
  if (!Array.isArray(extra)) throw invalid(file, `${where}.env must be a list of {name, value}`);
  for (const e of extra as unknown[]) {
    if (!isObject(e) || typeof e['name'] !== 'string' || typeof e['value'] !== 'string') throw invalid(file, `${where}.env must be a list of {name, value}`);
    env[e['name']] = e['value'];
  }
  const provide = raw['provideClusterInfo'];
  if (provide !== undefined && typeof provide !== 'boolean') throw invalid(file, `${where}.provideClusterInfo must be true or false`);
  const installHint = optionalString(file, where, raw, 'installHint');
  // As kubectl: a relative path with a slash is relative to the kubeconfig; a bare name is looked up in PATH.
  const resolved = !isAbsolute(command) && command.includes('/') ? resolve(dirname(file), command) : command;
  return {
    command: resolved,
    args,
    env,
    apiVersion,
    provideClusterInfo: provide === true,
    ...(installHint === undefined ? {} : { installHint }),
    source: `${uwhere} of ${file}`,
  };
}

export interface InClusterPaths {
  /** KUBERNETES_SERVICE_HOST */
  host: string;
  /** KUBERNETES_SERVICE_PORT */
  port: string | number;
  /** /var/run/secrets/kubernetes.io/serviceaccount/token */
  tokenFile: string;
  /** /var/run/secrets/kubernetes.io/serviceaccount/ca.crt */
  caFile: string;
  /** /var/run/secrets/kubernetes.io/serviceaccount/namespace */
  namespaceFile: string;
}

/** The service account's config inside a pod; the token file is re-read by the client as it rotates. */
export async function inClusterConfig(paths: InClusterPaths): Promise<KubeConfig> {
  const fail = (what: string, cause?: unknown): PglogError =>
    new PglogError('CONFIG_INVALID', `in-cluster Kubernetes config: ${what}`, cause === undefined ? undefined : { cause });
  if (paths.host === '') throw fail('no API server host (KUBERNETES_SERVICE_HOST is empty)');
  const port = Number(paths.port);
  if (!Number.isInteger(port) || port < 1 || port > 65535) throw fail(`API server port ${JSON.stringify(String(paths.port))} is not a port number`);
  const read = async (file: string, what: string): Promise<string> => {
    try {
      return await readFile(file, 'utf8');
    } catch (e) {
      throw fail(`cannot read the ${what} ${file}: ${(e as Error).message}`, e);
    }
  };
  const caCert = await read(paths.caFile, 'CA certificate');
  // Read once now so a missing mount fails at start, not at the first request.
  if ((await read(paths.tokenFile, 'service account token')).trim() === '') throw fail(`the service account token ${paths.tokenFile} is empty`);
  const namespace = (await read(paths.namespaceFile, 'namespace file')).trim();
  const host = paths.host.includes(':') ? `[${paths.host}]` : paths.host;
  return { server: `https://${host}:${port}`, caCert, tokenFile: paths.tokenFile, ...(namespace === '' ? {} : { namespace }) };
}
