/**
 * Where the API server is and how to authenticate: from a kubeconfig file (development, tests)
 * or from the pod's service account (in cluster). Both take paths as arguments: the entry
 * point reads the environment, not this module.
 */
import { readFile } from 'node:fs/promises';
import { dirname, isAbsolute, resolve } from 'node:path';
import { parse } from 'yaml';
import { PglogError } from '../../../collector/src/errors.ts';

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

/** The entry named `name` of a list like `clusters: [{name, cluster: {...}}]`. */
function namedEntry(file: string, doc: Yaml, list: string, field: string, name: string): Yaml {
  const entries = doc[list];
  if (!Array.isArray(entries)) throw invalid(file, `${list} is missing or not a list`);
  for (const e of entries as unknown[]) {
    if (isObject(e) && e['name'] === name) {
      const body = e[field];
      if (body === undefined || body === null) return {};
      if (!isObject(body)) throw invalid(file, `${list}[name=${name}].${field} must be a mapping`);
      return body;
    }
  }
  throw invalid(file, `no entry named ${JSON.stringify(name)} in ${list}`);
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

/**
 * Loads one context of a kubeconfig file (the current context unless `context` names one).
 * Supports bearer tokens (inline or `tokenFile`), client certificates, CA and server name;
 * exec and auth-provider plugins are not supported (an error names them).
 */
export async function loadKubeconfigFile(path: string, context?: string): Promise<KubeConfig> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (e) {
    throw invalid(path, `cannot read: ${(e as Error).message}`, e);
  }
  let doc: unknown;
  try {
    doc = parse(text);
  } catch (e) {
    throw invalid(path, `not valid YAML: ${(e as Error).message}`, e);
  }
  if (!isObject(doc)) throw invalid(path, 'not a mapping');
  const contextName = context ?? optionalString(path, 'kubeconfig', doc, 'current-context');
  if (contextName === undefined || contextName === '') throw invalid(path, 'no context given and current-context is not set');
  const ctx = namedEntry(path, doc, 'contexts', 'context', contextName);
  const where = `contexts[name=${contextName}].context`;
  const clusterName = optionalString(path, where, ctx, 'cluster');
  if (clusterName === undefined) throw invalid(path, `${where}.cluster is not set`);
  const cluster = namedEntry(path, doc, 'clusters', 'cluster', clusterName);
  const cwhere = `clusters[name=${clusterName}].cluster`;
  const server = optionalString(path, cwhere, cluster, 'server');
  if (server === undefined || server === '') throw invalid(path, `${cwhere}.server is not set`);
  let url: URL;
  try {
    url = new URL(server);
  } catch (e) {
    throw invalid(path, `${cwhere}.server ${JSON.stringify(server)} is not a URL`, e);
  }
  if (url.protocol !== 'https:') throw invalid(path, `${cwhere}.server must be an https:// URL (got ${url.protocol})`);
  const config: KubeConfig = { server };
  const caCert = await pem(path, cwhere, cluster, 'certificate-authority');
  if (caCert !== undefined) config.caCert = caCert;
  const tlsServerName = optionalString(path, cwhere, cluster, 'tls-server-name');
  if (tlsServerName !== undefined) config.tlsServerName = tlsServerName;
  const skip = cluster['insecure-skip-tls-verify'];
  if (skip !== undefined && typeof skip !== 'boolean') throw invalid(path, `${cwhere}.insecure-skip-tls-verify must be true or false`);
  if (skip === true) config.insecureSkipTlsVerify = true;

  const userName = optionalString(path, where, ctx, 'user');
  if (userName !== undefined && userName !== '') {
    const user = namedEntry(path, doc, 'users', 'user', userName);
    const uwhere = `users[name=${userName}].user`;
    const token = optionalString(path, uwhere, user, 'token');
    if (token !== undefined) config.token = token;
    const tokenFile = optionalString(path, uwhere, user, 'tokenFile');
    if (tokenFile !== undefined) config.tokenFile = isAbsolute(tokenFile) ? tokenFile : resolve(dirname(path), tokenFile);
    const clientCert = await pem(path, uwhere, user, 'client-certificate');
    const clientKey = await pem(path, uwhere, user, 'client-key');
    if ((clientCert === undefined) !== (clientKey === undefined)) throw invalid(path, `${uwhere}: client-certificate and client-key go together`);
    if (clientCert !== undefined && clientKey !== undefined) {
      config.clientCert = clientCert;
      config.clientKey = clientKey;
    }
    if (token === undefined && tokenFile === undefined && clientCert === undefined) {
      for (const plugin of ['exec', 'auth-provider', 'username']) {
        if (user[plugin] !== undefined) throw invalid(path, `${uwhere}.${plugin} is not supported: use a token, tokenFile or client certificate`);
      }
    }
  }
  const namespace = optionalString(path, where, ctx, 'namespace');
  if (namespace !== undefined && namespace !== '') config.namespace = namespace;
  return config;
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
