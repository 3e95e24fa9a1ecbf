/**
 * The Kubernetes API over node:https: one keep-alive agent with a bounded socket count,
 * bearer token (credentials.ts: inline, a file re-read as it rotates, an exec plugin) or
 * client certificate, 401 and 429 retried once and after Retry-After, typed errors.
 * No third-party Kubernetes client: we use a handful of verbs and want to own their errors.
 */
import type { IncomingMessage } from 'node:http';
import { Agent, request, type RequestOptions } from 'node:https';
import { setTimeout as sleep } from 'node:timers/promises';

import type { ApplyOptions, DeleteOptions, KubeClient, KubeObject, ListOptions, ListResult, ResourceType, WatchEvent, WatchOptions } from './client-types.ts';
import type { KubeConfig } from './config.ts';
import { tokenSource, type TokenSourceOptions } from './credentials.ts';
import { type ApiStatus, KubeError, kubeErrorFromStatus, kubeNetworkError } from './errors.ts';
import { ndjsonLines } from './ndjson.ts';
import { queryString, resourcePath } from './paths.ts';
import { apiVersionOf } from './resources.ts';

export interface KubeClientOptions {
  userAgent?: string;
  /** Idle timeout of one request (not of a watch, which the server ends after its timeoutSeconds). Default 30 s. */
  timeoutMs?: number;
  /** Sockets to the API server at most; more requests queue. Default 16. */
  maxSockets?: number;
  /** A 429's Retry-After is waited for up to this long (a longer one is cut to it). Default 10 s. */
  retryAfterCapMs?: number;
  /** 429 answers to one request waited out before it fails with KUBE_UNAVAILABLE. Default 5. */
  tooManyRequestsRetries?: number;
  /** Passed to the token source (the exec plugin's expiry clock, tests). */
  tokens?: TokenSourceOptions;
}

/** One API request as the client opens it (`query` from queryString(); `idleMs` ends a connection silent that long). */
interface ApiRequest {
  readonly method: string;
  readonly path: string;
  readonly query: string;
  readonly body?: string | undefined;
  readonly contentType?: string | undefined;
  readonly signal?: AbortSignal | undefined;
  readonly idleMs?: number | undefined;
}

interface Response {
  status: number;
  body: string;
}

/** A watch gets this long past its server-side timeout before we give up on a silent connection. */
const WATCH_GRACE_MS = 30_000;

/** Retry-After in milliseconds, within [0, capMs]; a missing or unreadable header waits a second. */
export function retryAfterMs(header: string | undefined, capMs: number, now: number = Date.now()): number {
  let ms = 1000;
  if (header !== undefined && header.trim() !== '') {
    const text = header.trim();
    if (/^\d+$/.test(text)) ms = Number(text) * 1000;
    else if (!Number.isNaN(Date.parse(text))) ms = Date.parse(text) - now;
  }
  return Math.min(Math.max(ms, 0), capMs);
}

export function createKubeClient(config: KubeConfig, options: KubeClientOptions = {}): KubeClient & { close(): void } {
  const base = new URL(config.server);
  if (base.protocol !== 'https:') throw new KubeError('KUBE_INVALID', `Kubernetes server ${config.server} must be https://`, 0, 'BadRequest');
  const prefix = base.pathname.replace(/(?<!\/)\/+$/, '');
  const timeoutMs = options.timeoutMs ?? 30_000;
  const userAgent = options.userAgent ?? 'pglog';
  const agent = new Agent({ keepAlive: true, maxSockets: options.maxSockets ?? 16, maxFreeSockets: 4, scheduling: 'lifo' });
  const tokens = tokenSource(config, options.tokens);
  const retryAfterCapMs = options.retryAfterCapMs ?? 10_000;
  const tooManyRequestsRetries = options.tooManyRequestsRetries ?? 5;
  const tls: RequestOptions = {
    ...(config.caCert !== undefined ? { ca: config.caCert } : {}),
    ...(config.clientCert !== undefined ? { cert: config.clientCert } : {}),
    ...(config.clientKey !== undefined ? { key: config.clientKey } : {}),
    ...(config.tlsServerName !== undefined ? { servername: config.tlsServerName } : {}),
    rejectUnauthorized: config.insecureSkipTlsVerify !== true,
  };

  /**
   * Starts a request; resolves with the response head (body unread) or rejects with a KubeError.
   * A 401 gets one retry when the token source can give another token (an exec plugin runs
   * again); a 429 is retried after its Retry-After (capped), a bounded number of times.
   */
  async function open(req: ApiRequest): Promise<IncomingMessage> {
    let retried401 = false;
    for (let waited429 = 0; ;) {
      const bearer = await tokens.token();
      const res = await openOnce(req, bearer);
      if (res.statusCode === 401 && !retried401 && tokens.refused(bearer)) {
        retried401 = true;
        res.resume();
        continue;
      }
      if (res.statusCode === 429 && waited429 < tooManyRequestsRetries) {
        waited429++;
        const header: string | undefined = res.headers['retry-after'];
        res.resume();
        await sleep(retryAfterMs(header, retryAfterCapMs), undefined, req.signal === undefined ? {} : { signal: req.signal });
        continue;
      }
      return res;
    }
  }

  async function openOnce({ method, path, query, body, contentType, signal, idleMs }: ApiRequest, bearer: string | undefined): Promise<IncomingMessage> {
    const where = `${method} ${path}`;
    const headers: Record<string, string> = { Accept: 'application/json', 'User-Agent': userAgent };
    if (bearer !== undefined && bearer !== '') headers['Authorization'] = `Bearer ${bearer}`;
    if (body !== undefined) {
      headers['Content-Type'] = contentType ?? 'application/json';
      headers['Content-Length'] = String(Buffer.byteLength(body));
    }
    return new Promise<IncomingMessage>((resolvePromise, reject) => {
      const req = request({
        ...tls,
        agent,
        method,
        headers,
        protocol: 'https:',
        hostname: base.hostname.replace(/^\[|\]$/g, ''),
        port: base.port === '' ? 443 : Number(base.port),
        path: `${prefix}${path}${query}`,
        ...(signal !== undefined ? { signal } : {}),
      });
      let timedOut = false;
      if (idleMs !== undefined) {
        req.setTimeout(idleMs, () => {
          timedOut = true;
          req.destroy();
        });
      }
      req.on('error', (e) => reject(signal?.aborted === true ? e : kubeNetworkError(where, e, timedOut)));
      req.on('response', (res) => {
        // Errors after the head arrive on the response stream; the reader of the body handles them.
        res.on('error', () => undefined);
        resolvePromise(res);
      });
      req.end(body);
    });
  }

  async function readBody(res: IncomingMessage, where: string): Promise<string> {
    const parts: Buffer[] = [];
    try {
      for await (const chunk of res) parts.push(chunk as Buffer);
    } catch (e) {
      throw kubeNetworkError(where, e);
    }
    return Buffer.concat(parts).toString('utf8');
  }

  async function send(method: string, path: string, query = '', body?: unknown, contentType?: string): Promise<Response> {
    const res = await open({ method, path, query, body: body === undefined ? undefined : JSON.stringify(body), contentType, idleMs: timeoutMs });
    return { status: res.statusCode ?? 0, body: await readBody(res, `${method} ${path}`) };
  }

  /** The parsed body of a 2xx answer; anything else throws the mapped KubeError. */
  function expectOk<T>(method: string, path: string, res: Response): T {
    if (res.status < 200 || res.status >= 300) throw kubeErrorFromStatus(`${method} ${path}`, res.status, res.body);
    try {
      return JSON.parse(res.body) as T;
    } catch (e) {
      throw new KubeError('KUBE_UNAVAILABLE', `${method} ${path}: HTTP ${res.status} with a body that is not JSON`, res.status, 'InternalError', { cause: e });
    }
  }

  async function call<T>(method: string, path: string, query = '', body?: unknown, contentType?: string): Promise<T> {
    return expectOk<T>(method, path, await send(method, path, query, body, contentType));
  }

  /** List items come without apiVersion and kind; the KubeObject contract has them. */
  function typed<T extends KubeObject>(type: ResourceType, item: T): T {
    if (item.apiVersion === undefined || item.kind === undefined)
      return { ...item, apiVersion: item.apiVersion ?? apiVersionOf(type), kind: item.kind ?? type.kind };
    return item;
  }

  const objectPath = (type: ResourceType, object: KubeObject, subresource?: string): string =>
    resourcePath(type, type.namespaced ? object.metadata.namespace : undefined, object.metadata.name, subresource);

  async function* watch<T extends KubeObject>(
    type: ResourceType,
    namespace: string | undefined,
    opts: WatchOptions,
    signal: AbortSignal,
  ): AsyncGenerator<WatchEvent<T>> {
    const path = resourcePath(type, namespace);
    const where = `GET ${path} (watch)`;
    const query = queryString({
      watch: 1,
      allowWatchBookmarks: true,
      resourceVersion: opts.resourceVersion === '' ? undefined : opts.resourceVersion,
      labelSelector: opts.labelSelector,
      fieldSelector: opts.fieldSelector,
      timeoutSeconds: opts.timeoutSeconds,
    });
    if (signal.aborted) return;
    let res: IncomingMessage;
    try {
      const idleMs = opts.timeoutSeconds === undefined ? undefined : opts.timeoutSeconds * 1000 + WATCH_GRACE_MS;
      res = await open({ method: 'GET', path, query, signal, idleMs });
    } catch (e) {
      if (signal.aborted) return;
      throw e;
    }
    try {
      const status = res.statusCode ?? 0;
      if (status !== 200) throw kubeErrorFromStatus(where, status, await readBody(res, where));
      for await (const line of ndjsonLines(res)) {
        let event: { type?: unknown; object?: unknown };
        try {
          event = JSON.parse(line) as typeof event;
        } catch (e) {
          throw new KubeError('KUBE_UNAVAILABLE', `${where}: a watch event that is not JSON: ${line.slice(0, 200)}`, status, 'InternalError', { cause: e });
        }
        const object = event.object as KubeObject | undefined;
        switch (event.type) {
          case 'ADDED':
          case 'MODIFIED':
          case 'DELETED':
            if (object === undefined) throw new KubeError('KUBE_UNAVAILABLE', `${where}: a ${event.type} event without an object`, status, 'InternalError');
            yield { type: event.type, object: typed(type, object as T) };
            break;
          case 'BOOKMARK':
            yield { type: 'BOOKMARK', resourceVersion: object?.metadata?.resourceVersion ?? '' };
            break;
          case 'ERROR': {
            // A Status; 410 Expired/Gone when the resourceVersion is too old: the caller lists again.
            const s = (event.object ?? {}) as ApiStatus;
            throw kubeErrorFromStatus(where, s.code ?? 500, s);
          }
          default:
            throw new KubeError('KUBE_UNAVAILABLE', `${where}: unknown watch event type ${JSON.stringify(event.type)}`, status, 'InternalError');
        }
      }
    } catch (e) {
      if (signal.aborted) return;
      if (e instanceof KubeError) throw e;
      throw kubeNetworkError(where, e);
    } finally {
      res.destroy();
    }
  }

  return {
    async get<T extends KubeObject>(type: ResourceType, namespace: string | undefined, name: string): Promise<T | null> {
      const path = resourcePath(type, namespace, name);
      const res = await send('GET', path);
      if (res.status === 404) return null;
      return typed(type, expectOk<T>('GET', path, res));
    },

    async list<T extends KubeObject>(type: ResourceType, namespace: string | undefined, opts: ListOptions = {}): Promise<ListResult<T>> {
      const path = resourcePath(type, namespace);
      const items: T[] = [];
      let token: string | undefined;
      for (;;) {
        const page = await call<{ items?: T[] | null; metadata?: { resourceVersion?: string; continue?: string } }>(
          'GET',
          path,
          queryString({
            labelSelector: opts.labelSelector,
            fieldSelector: opts.fieldSelector,
            limit: opts.limit,
            continue: token,
          }),
        );
        for (const item of page.items ?? []) items.push(typed(type, item));
        token = page.metadata?.continue;
        // Every page carries the resourceVersion of the first one's snapshot.
        if (token === undefined || token === '') return { items, resourceVersion: page.metadata?.resourceVersion ?? '' };
      }
    },

    watch,

    async create<T extends KubeObject>(type: ResourceType, object: T): Promise<T> {
      const path = resourcePath(type, type.namespaced ? object.metadata.namespace : undefined);
      return call<T>('POST', path, '', object);
    },

    async replace<T extends KubeObject>(type: ResourceType, object: T): Promise<T> {
      return call<T>('PUT', objectPath(type, object), '', object);
    },

    async replaceStatus<T extends KubeObject>(type: ResourceType, object: T): Promise<T> {
      return call<T>('PUT', objectPath(type, object, 'status'), '', object);
    },

    async apply<T extends KubeObject>(type: ResourceType, object: T, opts: ApplyOptions): Promise<T> {
      const query = queryString({ fieldManager: opts.fieldManager, force: opts.force === true ? true : undefined, dryRun: opts.dryRun });
      // JSON is YAML: the apply patch content type takes it as it is.
      return call<T>('PATCH', objectPath(type, object), query, object, 'application/apply-patch+yaml');
    },

    async mergePatch<T extends KubeObject>(type: ResourceType, namespace: string | undefined, name: string, patch: unknown, subresource?: string): Promise<T> {
      return call<T>('PATCH', resourcePath(type, namespace, name, subresource), '', patch, 'application/merge-patch+json');
    },

    async delete(type: ResourceType, namespace: string | undefined, name: string, opts: DeleteOptions = {}): Promise<boolean> {
      const path = resourcePath(type, namespace, name);
      const body = { apiVersion: 'v1', kind: 'DeleteOptions', ...opts };
      const res = await send('DELETE', path, '', body);
      if (res.status === 404) return false;
      expectOk<unknown>('DELETE', path, res);
      return true;
    },

    close(): void {
      agent.destroy();
    },
  };
}
