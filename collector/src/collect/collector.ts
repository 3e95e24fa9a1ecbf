/**
 * The standalone collector: every instance of every target streamed over its server's one
 * SSH connection into the store, until stop().
 *
 *   SshConnection (one per server) ─> LogFollower (one per instance) ─> InstanceStream ─┐
 *                                                                                      ├─> Batcher ─> StoreWriter
 *   ... every other instance ────────────────────────────────────────────────────────────┘
 *
 * Start-up never fails for a server or the store being away: streams retry with backoff and
 * readiness says what is missing. Stop is bounded: reading stops at once, what was parsed is
 * committed until the deadline, and whatever is left is read again next time from the
 * committed offsets.
 */
import { isPglogError } from '../errors.ts';
import type { PostgresInstance, PostgresTarget } from '../config/target-types.ts';
import { LogFollower } from '../follow/follower.ts';
import { TemplateCache } from '../protocol/normalize.ts';
import type { CollectorMetrics } from '../observability/metrics.ts';
import type { Logger } from '../observability/logger.ts';
import { streamKeyOf, StoreWriter } from '../store/store-writer.ts';
import { cryptoBindingAvailable } from '../transport/ssh-algorithms.ts';
import type { SshConnection } from '../transport/ssh-connection.ts';
import { SshConnectionPool } from '../transport/ssh-pool.ts';
import { isLastingSshFailure } from '../transport/ssh-errors.ts';
import { Batcher } from './batcher.ts';
import type { CollectConfig } from './collect-config.ts';
import { InstanceStream } from './instance-stream.ts';
import { backoffDelay, settleWithin } from './retry.ts';
import { pause } from '../transport/clock.ts';
import { streamHooks, batcherHooks } from './collector-hooks.ts';

/** SSH credentials of one target, read from its files at start-up. */
export interface TargetCredentials {
  privateKey: Buffer;
  /** Where the key came from (a file path), for messages; never the key itself. */
  privateKeySource: string;
  knownHosts: { text: string; source: string };
}

export interface CollectorOptions {
  config: CollectConfig;
  targets: readonly PostgresTarget[];
  credentials: ReadonlyMap<string, TargetCredentials>;
  log: Logger;
  metrics: CollectorMetrics;
}

/** How often the memory held for the store is sampled into its gauge. */
const PENDING_SAMPLE_MS = 1000;
/** Interval of partition maintenance (new days, retention). */
const MAINTENANCE_INTERVAL_MS = 60 * 60 * 1000;

export class Collector {
  private readonly o: CollectorOptions;
  private readonly abort = new AbortController();
  private readonly streamAborts = new Map<string, AbortController>();
  /** One SSH connection per target, handshakes paced by the pool's shared limiter. */
  private readonly connections = new SshConnectionPool();
  private readonly runs: Array<Promise<void>> = [];
  private writer: StoreWriter | null = null;
  private batcher: Batcher | null = null;
  private maintenance: Promise<void> | null = null;
  private gauges: NodeJS.Timeout | null = null;

  constructor(options: CollectorOptions) {
    this.o = options;
  }

  /** Readiness: the store is open and the collector is not stopping. */
  readiness(): { ready: boolean; reasons: string[] } {
    const reasons: string[] = [];
    if (this.writer === null) reasons.push('store not connected yet');
    if (this.abort.signal.aborted) reasons.push('stopping');
    return { ready: reasons.length === 0, reasons };
  }

  /** Opens the store (retrying while it is away) and starts every stream. Resolves once streams run. */
  async start(): Promise<void> {
    const { config, log } = this.o;
    const writer = await this.openStore();
    if (writer === null) return;
    this.writer = writer;
    const batcher = new Batcher(writer, config.batcher, batcherHooks(this.o.metrics, log, (target, instance) => {
      this.streamAborts.get(streamKeyOf(target, instance))?.abort();
    }));
    this.batcher = batcher;
    this.maintenance = this.maintainLoop(writer);
    // Memory held for the store, per target, sampled for /metrics (a gauge, not an event).
    const names = this.o.targets.map((t) => t.metadata.name);
    this.gauges = setInterval(() => { for (const n of names) this.o.metrics.pendingBytes(n, batcher.heldBytesOf(n)); }, PENDING_SAMPLE_MS);
    this.gauges.unref();
    const templates = new TemplateCache();
    for (const target of this.o.targets) {
      if (!target.spec.collect.logs) continue;
      const name = target.metadata.name;
      const creds = this.o.credentials.get(name);
      if (creds === undefined) throw new Error(`no credentials loaded for target ${name}`);
      const connection = this.connections.get({
        target: name,
        host: target.spec.host,
        port: target.spec.port,
        username: target.spec.user,
        privateKey: creds.privateKey,
        privateKeySource: creds.privateKeySource,
        knownHosts: creds.knownHosts,
        keepaliveIntervalMs: config.keepaliveIntervalMs,
        onStateChange: (state, error) => {
          this.o.metrics.targetConnected(name, state === 'ready');
          if (state === 'ready') {
            if (connection.connects > 1) this.o.metrics.reconnect(name);
            log.info({ target: name, cipher: connection.negotiatedCipher, nativeCrypto: cryptoBindingAvailable() }, `ssh ${name}: connected to ${target.spec.host}:${target.spec.port} (cipher ${connection.negotiatedCipher ?? 'unknown'})`);
          }
          // A refused host key or key is a lasting, security-relevant refusal: an error, not a blip.
          if (error !== undefined) log[isLastingSshFailure(error.code) ? 'error' : 'warn']({ target: name, state, code: error.code, err: error }, `ssh ${name}: ${state}: ${error.message}`);
        },
      });
      this.o.metrics.targetTransport(name, 'inproc');
      for (const instance of target.spec.instances) {
        this.startStream(target, instance, connection, batcher, writer, templates);
      }
    }
    log.info({ targets: this.o.targets.length, streams: this.runs.length }, `collecting ${this.runs.length} log streams from ${this.o.targets.length} targets`);
  }

  private startStream(target: PostgresTarget, instance: PostgresInstance, connection: SshConnection, batcher: Batcher, writer: StoreWriter, templates: TemplateCache): void {
    const name = target.metadata.name;
    const controller = new AbortController();
    this.abort.signal.addEventListener('abort', () => controller.abort(), { once: true });
    this.streamAborts.set(streamKeyOf(name, instance.name), controller);
    const follower = new LogFollower(connection, {
      target: name,
      instance: instance.name,
      dataDirectory: instance.dataDirectory,
      logDirectory: instance.logDirectory,
      logFormat: instance.logFormat,
      startAt: this.o.config.startAt,
    });
    const stream = new InstanceStream({
      target: name,
      instance: instance.name,
      format: instance.logFormat,
      prefix: instance.logLinePrefix,
      encodings: { defaultEncoding: instance.encodings.default, databases: instance.encodings.databases },
      maxEntryBytes: this.o.config.maxEntryBytes,
      templates,
      follower,
      batcher,
      claim: () => writer.claim(name, instance.name),
      hooks: streamHooks(this.o.metrics, this.o.log, name, instance.name),
    });
    const log = this.o.log;
    this.runs.push(stream.run(controller.signal).catch((e: unknown) => {
      // Only a fence ends a stream: another collector owns it now.
      log.error({ target: name, instance: instance.name, err: e, code: isPglogError(e) ? e.code : undefined }, `${name}/${instance.name}: stream stopped: ${(e as Error).message}`);
    }));
  }

  private async openStore(): Promise<StoreWriter | null> {
    const { config, log } = this.o;
    for (let attempt = 1; !this.abort.signal.aborted; attempt++) {
      try {
        return await StoreWriter.open({
          url: config.storeUrl,
          applicationName: 'pglog collect',
          retentionDays: config.retentionDays,
          log: (level: 'info' | 'warn' | 'error', msg: string, fields?: object) => { log[level](fields ?? {}, msg); },
        });
      } catch (e) {
        const delay = backoffDelay(attempt, 500, 15_000);
        this.o.metrics.storeError(isPglogError(e) ? e.code : 'UNKNOWN');
        log.warn({ err: e, code: isPglogError(e) ? e.code : undefined, retryInMs: delay }, `store not available: ${(e as Error).message}`);
        await pause(delay, this.abort.signal);
      }
    }
    return null;
  }

  private async maintainLoop(writer: StoreWriter): Promise<void> {
    while (!this.abort.signal.aborted) {
      await pause(MAINTENANCE_INTERVAL_MS, this.abort.signal);
      if (this.abort.signal.aborted) return;
      try {
        const { created, dropped } = await writer.maintain();
        if (created.length + dropped.length > 0) this.o.log.info({ created, dropped }, 'store partitions maintained');
      } catch (e) {
        this.o.log.warn({ err: e }, `store partition maintenance failed: ${(e as Error).message}`);
      }
    }
  }

  /**
   * Stops reading at once, commits what was parsed until `deadline` (ms since epoch), and
   * closes everything. Idempotent.
   */
  async stop(deadline: number): Promise<void> {
    if (this.abort.signal.aborted) return;
    this.abort.abort();
    if (this.gauges !== null) clearInterval(this.gauges);
    const left = (): number => Math.max(0, deadline - Date.now());
    // Streams end as soon as their follower notices the abort; do not wait past half the time.
    await settleWithin(Promise.allSettled(this.runs), left() / 2);
    await this.batcher?.stop(deadline);
    await settleWithin(this.connections.closeAll(), left());
    await this.maintenance;
    await settleWithin(this.writer?.close(), left());
  }
}
