/**
 * The HTTP endpoint of `pglog collect` (standalone and cluster mode): /metrics, /healthz and
 * /readyz on --listen, or none without it.
 */
import { type MetricsSource, type Readiness, type RunningHttpServer, startHttpServer } from '@pglog/common/observability/http-server.ts';
import type { Logger } from '@pglog/common/observability/logger.ts';

/** Starts the endpoint on `listen` (null: none) and logs where it listens. */
export async function startCollectHttp(
  listen: { host: string; port: number } | null,
  metrics: MetricsSource,
  ready: () => Readiness,
  log: Logger,
): Promise<RunningHttpServer | null> {
  if (listen === null) return null;
  const http = await startHttpServer({ host: listen.host, port: listen.port, metrics, ready, log });
  log.info({ listen: http.address }, `metrics and health on http://${http.address.host}:${http.address.port}`);
  return http;
}
