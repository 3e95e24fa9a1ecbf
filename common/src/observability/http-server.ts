/**
 * The HTTP endpoint of the collector and the operator: /metrics (Prometheus), /healthz (liveness), /readyz
 * (readiness). node:http, GET and HEAD only, nothing else served.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

import type { Logger } from './logger.ts';

// node:http as its CommonJS object, not through an ES import: an ES module's import makes Node
// build the module's ES namespace by reading every export, and node:http's lazy WebSocket,
// CloseEvent and MessageEvent getters then load undici (and with it http2, web streams and
// worker_threads), which nothing in pglog uses: alone 112 built-in modules and 16.9 MB of RSS
// against 38 and 3.5 MB, about 3 MB in a collector, which loads much of the rest anyway
// (docs/benchmarks.md, "Built-in modules loaded through ES imports").
const { createServer } = process.getBuiltinModule('node:http');

/** What /metrics serves: a Prometheus registry's text (the collector's or the operator's). */
export interface MetricsSource {
  readonly contentType: string;
  metricsText(): Promise<string>;
}

export interface Readiness {
  ready: boolean;
  /** Why the process is not ready (or notes while ready); one per line in the /readyz body. */
  reasons: string[];
}

export interface HttpServerOptions {
  /** Interface to listen on, e.g. '0.0.0.0' in a pod, '127.0.0.1' in tests. */
  host: string;
  /** 0 picks a free port (tests). */
  port: number;
  metrics: MetricsSource;
  ready: () => Readiness;
  log: Logger;
}

export interface RunningHttpServer {
  address: { host: string; port: number };
  /** Stops accepting, closes idle keep-alive connections, waits for requests in flight. */
  close(): Promise<void>;
}

// Idle keep-alive connections stay open longer than Prometheus' and common load balancers'
// idle timeouts (AWS ALB 60 s, GCP 600 s is the outlier we do not chase): the client closes
// an idle connection first, so it never sends a request on a socket the server is closing
// at that moment (a spurious "connection reset" scrape failure).
const KEEP_ALIVE_TIMEOUT_MS = 65_000;
// Must exceed keepAliveTimeout, or a request arriving on a reused connection just before the
// keep-alive expiry could be cut off while its headers are still arriving.
const HEADERS_TIMEOUT_MS = 66_000;
// Time to receive a whole request. Node requires it to be at least headersTimeout; our
// requests are GETs without a body, so this only bounds a client trickling its request.
const REQUEST_TIMEOUT_MS = 90_000;
// Prometheus, the kubelet's two probes and a person with curl: a handful of connections.
// The bound keeps a misbehaving client from holding file descriptors the collector needs.
const MAX_CONNECTIONS = 64;

function send(res: ServerResponse, status: number, contentType: string, body: string, head: boolean): void {
  res.writeHead(status, {
    'Content-Type': contentType,
    'Content-Length': Buffer.byteLength(body),
    'Cache-Control': 'no-store',
  });
  res.end(head ? undefined : body);
}

const TEXT = 'text/plain; charset=utf-8';

export async function startHttpServer(options: HttpServerOptions): Promise<RunningHttpServer> {
  const { metrics, ready, log } = options;

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const method = req.method ?? 'GET';
    const head = method === 'HEAD';
    if (method !== 'GET' && !head) {
      res.setHeader('Allow', 'GET, HEAD');
      send(res, 405, TEXT, 'method not allowed\n', false);
      return;
    }
    const path = (req.url ?? '/').split('?', 1)[0] ?? '/';
    switch (path) {
      case '/healthz':
        // Answering at all proves the process and its event loop are working.
        send(res, 200, TEXT, 'ok\n', head);
        return;
      case '/readyz': {
        const r = ready();
        const lines = r.reasons.length > 0 ? r.reasons : [r.ready ? 'ready' : 'not ready'];
        send(res, r.ready ? 200 : 503, TEXT, `${lines.join('\n')}\n`, head);
        return;
      }
      case '/metrics':
        send(res, 200, metrics.contentType, await metrics.metricsText(), head);
        return;
      default:
        send(res, 404, TEXT, 'not found\n', head);
    }
  };

  const server = createServer(
    { keepAliveTimeout: KEEP_ALIVE_TIMEOUT_MS, headersTimeout: HEADERS_TIMEOUT_MS, requestTimeout: REQUEST_TIMEOUT_MS },
    (req, res) => {
      handle(req, res).catch((e: unknown) => {
        log.error({ err: e, path: req.url }, 'http request failed');
        if (!res.headersSent) send(res, 500, TEXT, 'internal error\n', false);
        else res.destroy();
      });
    },
  );
  server.maxConnections = MAX_CONNECTIONS;

  await new Promise<void>((resolve, reject) => {
    const onError = (e: Error): void => reject(new Error(`cannot listen on ${options.host}:${options.port} for /metrics: ${e.message}`, { cause: e }));
    server.once('error', onError);
    server.listen(options.port, options.host, () => {
      server.off('error', onError);
      resolve();
    });
  });
  server.on('error', (e) => log.error({ err: e }, 'http server error'));
  const addr = server.address() as AddressInfo;
  log.info({ host: addr.address, port: addr.port }, 'http server listening');

  let closing: Promise<void> | null = null;
  return {
    address: { host: addr.address, port: addr.port },
    close(): Promise<void> {
      closing ??= new Promise<void>((resolve, reject) => {
        server.close((e) => (e === undefined ? resolve() : reject(e)));
        // Idle keep-alive sockets would hold close() open for up to keepAliveTimeout.
        server.closeIdleConnections();
      });
      return closing;
    },
  };
}
