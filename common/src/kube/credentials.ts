/**
 * Where the client's bearer token comes from: the kubeconfig as is, a token file re-read as it
 * rotates (projected service account tokens, `tokenFile`), or an exec credential plugin
 * (client.authentication.k8s.io/v1) run when the token is needed and cached until its
 * expirationTimestamp. A 401 tells the source that the token it gave was refused, so an exec
 * plugin runs again once (kubectl does the same).
 */
import { execFile } from 'node:child_process';
import { readFile, stat } from 'node:fs/promises';

import type { ExecPlugin, KubeConfig } from './config.ts';
import { EXEC_API_VERSION } from './config.ts';
import { KubeError } from './errors.ts';

export interface TokenSource {
  /** The bearer token to send, or undefined (client certificate, or none). */
  token(): Promise<string | undefined>;
  /**
   * The server refused `used` (401). True when asking again can give another token, so the
   * request is worth one retry; an exec plugin's cached token is dropped.
   */
  refused(used: string | undefined): boolean;
}

export interface TokenSourceOptions {
  now?: () => number;
  /** An exec plugin that has not answered within this time fails. Default 60 s. */
  execTimeoutMs?: number;
}

export function tokenSource(config: KubeConfig, options: TokenSourceOptions = {}): TokenSource {
  if (config.tokenFile !== undefined) return fileTokenSource(config.tokenFile);
  if (config.exec !== undefined && config.token === undefined) return execTokenSource(config, config.exec, options);
  return { token: () => Promise.resolve(config.token), refused: () => false };
}

/** The file is re-read when its mtime or size changes. */
function fileTokenSource(file: string): TokenSource {
  let cached: { mtimeMs: number; size: number; token: string } | undefined;
  return {
    async token() {
      try {
        const s = await stat(file);
        if (cached === undefined || cached.mtimeMs !== s.mtimeMs || cached.size !== s.size) {
          cached = { mtimeMs: s.mtimeMs, size: s.size, token: (await readFile(file, 'utf8')).trim() };
        }
        return cached.token;
      } catch (e) {
        // The last token we read may still be valid (the kubelet swaps the file by rename).
        if (cached !== undefined) return cached.token;
        throw new KubeError('KUBE_FORBIDDEN', `cannot read the token file ${file}: ${(e as Error).message}`, 0, 'Unauthorized', { cause: e });
      }
    },
    // The file is read on every request already: a retry would send the same token.
    refused: () => false,
  };
}

function pluginError(plugin: ExecPlugin, what: string, cause?: unknown): KubeError {
  const hint = plugin.installHint === undefined ? '' : ` (${plugin.installHint.trim()})`;
  return new KubeError(
    'KUBE_FORBIDDEN',
    `exec credential plugin ${plugin.command} (${plugin.source}): ${what}${hint}`,
    0,
    'Unauthorized',
    cause === undefined ? undefined : { cause },
  );
}

/** KUBERNETES_EXEC_INFO: what the plugin is told about the request (never interactive: we have no terminal to lend). */
export function execInfo(config: KubeConfig, plugin: ExecPlugin): string {
  const spec: Record<string, unknown> = { interactive: false };
  if (plugin.provideClusterInfo) {
    spec['cluster'] = {
      server: config.server,
      ...(config.caCert === undefined ? {} : { 'certificate-authority-data': Buffer.from(config.caCert).toString('base64') }),
      ...(config.tlsServerName === undefined ? {} : { 'tls-server-name': config.tlsServerName }),
      ...(config.insecureSkipTlsVerify === true ? { 'insecure-skip-tls-verify': true } : {}),
    };
  }
  return JSON.stringify({ apiVersion: EXEC_API_VERSION, kind: 'ExecCredential', spec });
}

/** Parses the plugin's standard output: an ExecCredential whose status has a token. */
export function parseExecCredential(plugin: ExecPlugin, stdout: string): { token: string; expiresAt: number | null } {
  let doc: unknown;
  try {
    doc = JSON.parse(stdout);
  } catch (e) {
    throw pluginError(plugin, 'its output is not JSON', e);
  }
  const o = (typeof doc === 'object' && doc !== null ? doc : {}) as Record<string, unknown>;
  if (o['apiVersion'] !== plugin.apiVersion || o['kind'] !== 'ExecCredential') {
    throw pluginError(
      plugin,
      `its output is not an ExecCredential of ${plugin.apiVersion} (apiVersion ${JSON.stringify(o['apiVersion'])}, kind ${JSON.stringify(o['kind'])})`,
    );
  }
  const status = (typeof o['status'] === 'object' && o['status'] !== null ? o['status'] : {}) as Record<string, unknown>;
  const token = status['token'];
  if (typeof token !== 'string' || token === '') {
    const certs = status['clientCertificateData'] !== undefined ? ': client certificates from a plugin are not supported' : '';
    throw pluginError(plugin, `its ExecCredential has no status.token${certs}`);
  }
  const exp = status['expirationTimestamp'];
  if (exp === undefined || exp === null) return { token, expiresAt: null };
  const at = typeof exp === 'string' ? Date.parse(exp) : NaN;
  if (Number.isNaN(at)) throw pluginError(plugin, `status.expirationTimestamp ${JSON.stringify(exp)} is not an RFC 3339 time`);
  return { token, expiresAt: at };
}

function runPlugin(config: KubeConfig, plugin: ExecPlugin, timeoutMs: number): Promise<string> {
  return new Promise((resolvePromise, reject) => {
    execFile(
      plugin.command,
      plugin.args,
      {
        env: { ...plugin.env, KUBERNETES_EXEC_INFO: execInfo(config, plugin) },
        timeout: timeoutMs,
        maxBuffer: 1024 * 1024,
        encoding: 'utf8',
      },
      (error, stdout, stderr) => {
        if (error !== null) {
          const why = (error as NodeJS.ErrnoException).code === 'ENOENT' ? 'not found' : `failed: ${stderr.trim().slice(0, 500) || error.message}`;
          reject(pluginError(plugin, why, error));
          return;
        }
        resolvePromise(stdout);
      },
    );
  });
}

function execTokenSource(config: KubeConfig, plugin: ExecPlugin, options: TokenSourceOptions): TokenSource {
  const now = options.now ?? Date.now;
  const timeoutMs = options.execTimeoutMs ?? 60_000;
  let cached: { token: string; expiresAt: number | null } | undefined;
  // Concurrent requests share one run of the plugin.
  let running: Promise<string> | undefined;
  return {
    async token() {
      if (cached !== undefined && (cached.expiresAt === null || cached.expiresAt > now())) return cached.token;
      running ??= runPlugin(config, plugin, timeoutMs)
        .then((stdout) => {
          cached = parseExecCredential(plugin, stdout);
          return cached.token;
        })
        .finally(() => {
          running = undefined;
        });
      return running;
    },
    refused(used) {
      // Another request may have refreshed it already: then the retry uses that one.
      if (cached !== undefined && cached.token === used) cached = undefined;
      return true;
    },
  };
}
