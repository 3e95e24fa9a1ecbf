/**
 * The collector: every instance of every target streamed over its server's one SSH
 * connection into the store, until stop(). Standalone, the targets are fixed at start;
 * in cluster mode assign() changes them at run time (the shard's spec).
 *
 *   SshConnection (one per server) ─┐
 *                                   ├─> LogFollower (one per instance) ─> InstanceStream ─┐
 *   sshproxy sidecar (FIFOs) ───────┘                                                     ├─> Batcher ─> StoreWriter
 *   ... every other instance ───────────────────────────────────────────────────────────────┘
 *
 * Each target reads through one transport at a time (TargetStreams); TransportControl moves
 * hot targets to the sidecar and cold ones back (docs/decisions/0007-transport-promotion.md). In standalone mode the sidecar is
 * this process's child (SidecarChild) with a private directory.
 *
 * Start-up never fails for a server or the store being away: streams retry with backoff and
 * readiness says what is missing. Stop is bounded: reading stops at once, what was parsed is
 * committed until the deadline, and whatever is left is read again next time from the
 * committed offsets.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Writable } from 'node:stream';

import { type PostgresInstance, type PostgresTarget, takesSnapshots } from '@pglog/common/api/postgres-target.ts';
import { isPglogError } from '@pglog/common/errors.ts';
import type { Logger } from '@pglog/common/observability/logger.ts';
import { settleWithin } from '@pglog/common/time/retry.ts';

import { TemplateCache } from '../logformat/normalize/normalize.ts';
import type { CollectorMetrics } from '../observability/metrics.ts';
import { SidecarChild } from '../promotion/sidecar-child.ts';
import { TransportControl } from '../promotion/transport-control.ts';
import { InstanceSnapshots } from '../sampler/instance-snapshots.ts';
import { SnapshotSink } from '../sampler/snapshot-sink.ts';
import { SqlSnapshotSource } from '../sampler/sql-snapshot-source.ts';
import type { StoreWriter } from '../store/store-writer.ts';
import { type StorePosition, streamKeyOf } from '../store/store-writer.ts';
import { SidecarClient } from '../transport/sidecar-client.ts';
import { SshConnectionPool } from '../transport/ssh-pool.ts';
import { planAssignment, type PlannedTarget, type TargetAssignment, targetFingerprint } from './assignment-plan.ts';
import { Batcher } from './batcher.ts';
import type { CollectConfig } from './collect-types.ts';
import { batcherHooks, streamHooks } from './collector-hooks.ts';
import type { TargetCredentials } from './credentials.ts';
import { InstanceStream } from './instance-stream.ts';
import { maintainStore, openStoreWhenUp } from './store-lifecycle.ts';
import { observedHooks, TargetObservation, type TargetSnapshot } from './target-observation.ts';
import type { TargetStreams } from './target-streams.ts';
import { openTargetStreams, type RateHint } from './target-transports.ts';

export type { TargetAssignment } from './assignment-plan.ts';
export type { TargetSnapshot } from './target-observation.ts';

export interface CollectorOptions {
  config: CollectConfig;
  targets: readonly PostgresTarget[];
  credentials: ReadonlyMap<string, TargetCredentials>;
  log: Logger;
  metrics: CollectorMetrics;
  /** How to run this program again ([node, ...flags, main script]), for the sshproxy child. */
  selfCommand: readonly string[];
  /** The log's destination, shared with the sshproxy child's log lines. */
  logOutput: Writable;
  /** The process environment, for the sshproxy child (which gets it without the store URL). */
  env?: Readonly<Record<string, string | undefined>>;
}

/** How often the memory held for the store is sampled into its gauge. */
const PENDING_SAMPLE_MS = 1000;
/** Interval of partition maintenance (new days, retention). */

/** A target whose streams run: what stops them, and what it was started with. */
interface RunningTarget {
  streams: TargetStreams;
  /** Aborted to stop this target's streams (removed, restarted) without stopping the rest. */
  abort: AbortController;
  runs: Array<Promise<void>>;
  /** Assignment epoch (cluster) or null (standalone: the store takes the next). */
  epoch: number | null;
  fingerprint: string;
  observed: TargetObservation;
  /** The SQL sides of its instances (snapshots), closed when the target stops. */
  sql: SqlSnapshotSource[];
}

/** Whether a target has anything for this process to do: logs, SQL snapshots, or both. */
function collectsAnything(target: PostgresTarget): boolean {
  return target.spec.collect.logs || takesSnapshots(target.spec.collect);
}

export class Collector {
  private readonly o: CollectorOptions;
  private readonly abort = new AbortController();
  private readonly streamAborts = new Map<string, AbortController>();
  /** One SSH connection per target, handshakes paced by the pool's shared limiter. */
  private readonly connections = new SshConnectionPool();
  private readonly runs = new Set<Promise<void>>();
  private writer: StoreWriter | null = null;
  private batcher: Batcher | null = null;
  /** SQL snapshots of every instance, grouped into one store transaction per half second. */
  private snapshotSink: SnapshotSink | null = null;
  private maintenance: Promise<void> | null = null;
  private gauges: NodeJS.Timeout | null = null;
  private sidecar: SidecarClient | null = null;
  private sidecarChild: SidecarChild | null = null;
  /** A directory this process made for its sidecar child (removed at stop). */
  private privateDir: string | null = null;
  private control: Promise<void> | null = null;
  private readonly running = new Map<string, RunningTarget>();
  /** Credentials by target: the file-read ones, then whatever assign() gave. */
  private readonly credentials: Map<string, TargetCredentials>;
  /** One per process, shared by every stream: bounded in bytes (--template-cache-bytes). */
  private readonly templates: TemplateCache;
  private openedSidecar: SidecarClient | null = null;
  private started = false;
  /** The newest assignment asked for (cluster mode); applied once started, one at a time. */
  private desired: readonly TargetAssignment[] | null = null;
  private applying: Promise<void> = Promise.resolve();

  constructor(options: CollectorOptions) {
    this.o = options;
    this.credentials = new Map(options.credentials);
    this.templates = new TemplateCache({ maxBytes: options.config.templateCacheBytes });
    options.metrics.watchTemplateCache(this.templates);
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
    const writer = await openStoreWhenUp(this.o.config, this.o.log, this.o.metrics, this.abort.signal);
    if (writer === null) return;
    this.writer = writer;
    const hooks = batcherHooks(this.o.metrics, log, (target, instance) => {
      this.streamAborts.get(streamKeyOf(target, instance))?.abort();
    });
    const batcher = new Batcher(
      writer,
      { ...config.batcher, lanes: writer.connections },
      {
        ...hooks,
        committed: (result, info) => {
          hooks.committed?.(result, info);
          this.noteCommitted(info.newest, info.positions);
        },
      },
    );
    this.batcher = batcher;
    this.snapshotSink = new SnapshotSink({ writeGroup: (list) => writer.writeSnapshots(list) });
    this.maintenance = maintainStore(writer, this.o.log, this.abort.signal);
    // Memory held for the store, per target, sampled for /metrics (a gauge, not an event).
    this.gauges = setInterval(() => {
      for (const n of this.running.keys()) this.o.metrics.pendingBytes(n, batcher.heldBytesOf(n));
    }, PENDING_SAMPLE_MS);
    this.gauges.unref();
    const sidecar = await this.openSidecar();
    this.openedSidecar = sidecar;
    for (const target of this.o.targets) {
      if (!collectsAnything(target)) continue;
      await this.startTarget(target, null);
    }
    this.control = new TransportControl({
      targets: () => [...this.running.values()].map((r) => r.streams),
      settings: config.transport.policy,
      sidecar,
      metrics: this.o.metrics,
      log,
    }).run(this.abort.signal);
    this.started = true;
    if (this.o.targets.length > 0)
      log.info({ targets: this.o.targets.length, streams: this.runs.size }, `collecting ${this.runs.size} log streams from ${this.o.targets.length} targets`);
    if (this.desired !== null) await this.scheduleApply();
  }

  /**
   * Cluster mode: the targets to collect now, each with its credentials, epoch and transport.
   * New targets start (claiming with their epoch), removed ones stop once what they handed
   * over is committed, changed ones (spec, credentials, epoch) restart, and a new transport
   * moves a target through the switch path. Calls are applied one after another, the newest
   * last; before start() has opened the store the assignment waits for it. Resolves once applied.
   */
  assign(assignments: readonly TargetAssignment[]): Promise<void> {
    this.desired = assignments;
    if (!this.started) return Promise.resolve();
    return this.scheduleApply();
  }

  /** Per running target: transport, rates, lag, connected, epoch, errors, committed offsets. */
  targetSnapshots(): TargetSnapshot[] {
    const now = performance.now();
    return [...this.running.values()]
      .map((r) => r.observed.snapshot(r.streams.transport, r.streams.meter.bytesPerS, now))
      .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  }

  /**
   * Stops reading every target at once and commits what they handed over (nothing else
   * stops: the store connection and the sidecar stay). For a clean hand-over of the whole
   * process (a restart for new tuning) before stop().
   */
  async drain(): Promise<void> {
    this.desired = [];
    if (this.started) await this.scheduleApply();
  }

  private scheduleApply(): Promise<void> {
    const next = this.applying.then(() => this.applyDesired());
    this.applying = next.catch((e: unknown) => {
      this.o.log.error({ err: e }, `applying the assignment failed: ${(e as Error).message}`);
    });
    return this.applying;
  }

  private async applyDesired(): Promise<void> {
    const desired = this.desired;
    if (desired === null || this.abort.signal.aborted) return;
    const wanted = new Map<string, TargetAssignment>();
    for (const a of desired) if (collectsAnything(a.target)) wanted.set(a.target.metadata.name, a);
    const fingerprints = new Map([...wanted].map(([name, a]) => [name, targetFingerprint(a.target, a.credentials)]));
    const runningNow: PlannedTarget[] = [...this.running.values()].map((r) => ({
      name: r.streams.name,
      fingerprint: r.fingerprint,
      epoch: r.epoch,
      transport: r.streams.pinned,
    }));
    const wantedNow: PlannedTarget[] = [...wanted.values()].map((a) => ({
      name: a.target.metadata.name,
      fingerprint: fingerprints.get(a.target.metadata.name)!,
      epoch: a.epoch,
      transport: a.transport,
    }));
    const plan = planAssignment(runningNow, wantedNow);
    for (const { name, transport } of plan.repin) this.running.get(name)?.streams.setPinned(transport);
    const leaving = [...plan.stop, ...plan.restart];
    if (leaving.length > 0) {
      this.o.log.info({ stop: plan.stop, restart: plan.restart }, `assignment: stopping ${leaving.join(', ')}`);
      await this.stopTargets(leaving);
      // Those that left (not restarts) take their metric series and sidecar key copies along.
      for (const name of plan.stop) {
        this.o.metrics.forgetTarget(name);
        await this.openedSidecar?.removeServer(name);
      }
    }
    for (const name of [...plan.restart, ...plan.start].sort()) {
      if (this.abort.signal.aborted) return;
      const a = wanted.get(name)!;
      this.credentials.set(name, a.credentials);
      await this.startTarget({ ...a.target, spec: { ...a.target.spec, transport: a.transport } }, a.epoch, fingerprints.get(name), a.rateHint);
    }
    if (plan.start.length + plan.restart.length > 0) {
      this.o.log.info(
        { start: plan.start, restart: plan.restart, streams: this.runs.size },
        `assignment: collecting ${[...plan.start, ...plan.restart].join(', ')}`,
      );
    }
  }

  /**
   * Ends the targets' streams, then commits everything they handed over, then lets their
   * connections go: a new owner that claims with a higher epoch resumes exactly there.
   */
  private async stopTargets(names: readonly string[]): Promise<void> {
    const stopping = names.map((n) => this.running.get(n)).filter((r) => r !== undefined);
    for (const r of stopping) r.abort.abort();
    await Promise.allSettled(stopping.flatMap((r) => r.runs));
    await Promise.allSettled(stopping.flatMap((r) => r.sql.map((s) => s.close())));
    await this.batcher?.flush();
    for (const r of stopping) {
      this.running.delete(r.streams.name);
      // Its key is not kept past its streams (a restart sets the new one before starting).
      this.credentials.delete(r.streams.name);
      for (const run of r.runs) this.runs.delete(run);
      for (const instance of r.streams.target.spec.instances) this.streamAborts.delete(streamKeyOf(r.streams.name, instance.name));
      await this.connections.remove(r.streams.name);
    }
  }

  private async startTarget(target: PostgresTarget, epoch: number | null, fingerprint?: string, rateHint?: RateHint): Promise<void> {
    const batcher = this.batcher!;
    const writer = this.writer!;
    const name = target.metadata.name;
    const creds = this.credentials.get(name);
    if (creds === undefined) throw new Error(`no credentials loaded for target ${name}`);
    const streams = await openTargetStreams(target, creds, {
      config: this.o.config,
      connections: this.connections,
      sidecar: this.openedSidecar,
      metrics: this.o.metrics,
      log: this.o.log,
      ...(rateHint === undefined ? {} : { rateHint }),
    });
    const running: RunningTarget = {
      streams,
      abort: new AbortController(),
      runs: [],
      epoch,
      fingerprint: fingerprint ?? targetFingerprint(target, creds),
      // Without logs there is no stream to be connected: only snapshots report (snapshotError).
      observed: new TargetObservation(
        name,
        target.spec.collect.logs ? target.spec.instances.map((i) => i.name) : [],
        epoch,
        this.o.config.transport.rateTimeConstantMs,
        performance.now(),
        rateHint?.linesPerSecond ?? 0,
      ),
      sql: [],
    };
    this.running.set(name, running);
    if (target.spec.collect.logs) {
      for (const instance of target.spec.instances) {
        if (epoch !== null) batcher.unfence(name, instance.name);
        this.startStream(running, instance, batcher, writer);
      }
    }
    if (takesSnapshots(target.spec.collect)) {
      for (const instance of target.spec.instances) this.startSnapshots(running, instance, this.snapshotSink!);
    }
  }

  /** The instance's SQL snapshots, through the target's SSH connection or the sidecar's forward. */
  private startSnapshots(running: RunningTarget, instance: PostgresInstance, sink: SnapshotSink): void {
    const { streams } = running;
    const connection = this.connections.find(streams.name);
    if (connection === undefined) throw new Error(`no SSH connection for target ${streams.name}`);
    const source = new SqlSnapshotSource({
      target: streams.target,
      instance,
      connection,
      sidecar: this.openedSidecar,
      transport: () => streams.transport,
      log: this.o.log,
    });
    running.sql.push(source);
    const snapshots = new InstanceSnapshots({
      target: streams.name,
      instance: instance.name,
      collect: streams.target.spec.collect,
      source,
      write: (s) => sink.write(s),
      metrics: this.o.metrics.snapshots,
      log: this.o.log,
      outcome: (kind, code) => running.observed.snapshotResult(instance.name, kind, code),
      rolePrivilege: (privilege) => running.observed.sqlRole(instance.name, privilege),
    });
    const run = snapshots.run(AbortSignal.any([this.abort.signal, running.abort.signal]));
    running.runs.push(run);
    this.runs.add(run);
  }

  private noteCommitted(newest: ReadonlyArray<{ target: string; instance: string; ms: number }>, positions: readonly StorePosition[]): void {
    if (this.running.size === 0) return;
    const byTarget = new Map<string, { newest: Array<{ instance: string; ms: number }>; positions: StorePosition[] }>();
    const of = (t: string): { newest: Array<{ instance: string; ms: number }>; positions: StorePosition[] } => {
      let e = byTarget.get(t);
      if (e === undefined) byTarget.set(t, (e = { newest: [], positions: [] }));
      return e;
    };
    for (const n of newest) of(n.target).newest.push(n);
    for (const p of positions) of(p.target).positions.push(p);
    for (const [target, e] of byTarget) this.running.get(target)?.observed.committed(e.newest, e.positions);
  }

  /**
   * A reloaded targets file: `spec.transport` changes take effect at the next policy round.
   * Returns what else changed, which needs a restart (added, removed or otherwise edited targets).
   */
  applyTargets(targets: readonly PostgresTarget[]): string[] {
    const ignored: string[] = [];
    const fresh = new Map(targets.map((t) => [t.metadata.name, t]));
    for (const [name, { streams: running }] of this.running) {
      const next = fresh.get(name);
      if (next === undefined) {
        ignored.push(`${name} removed`);
        continue;
      }
      running.setPinned(next.spec.transport);
      if (JSON.stringify({ ...next.spec, transport: null }) !== JSON.stringify({ ...running.target.spec, transport: null })) ignored.push(`${name} changed`);
    }
    for (const name of fresh.keys()) if (!this.running.has(name) && collectsAnything(fresh.get(name)!)) ignored.push(`${name} added`);
    return ignored;
  }

  /** The sidecar's directory and client, and in child mode the sidecar process; null with --sshproxy off. */
  private async openSidecar(): Promise<SidecarClient | null> {
    const { transport, logLevel } = this.o.config;
    if (transport.sidecar === 'off') return null;
    let dir = transport.sidecarDir;
    if (dir === null) {
      // Short on purpose: OpenSSH control socket paths must fit in 108 bytes.
      dir = await mkdtemp(join(tmpdir(), 'pglog-sp-'));
      this.privateDir = dir;
    }
    const client = await SidecarClient.open({ dir });
    this.sidecar = client;
    if (transport.sidecar === 'child') {
      this.sidecarChild = new SidecarChild({
        command: this.o.selfCommand,
        client,
        logLevel,
        output: this.o.logOutput,
        privateDir: this.privateDir !== null,
        log: this.o.log,
        metrics: this.o.metrics,
        ...(this.o.env === undefined ? {} : { env: this.o.env }),
      });
      this.sidecarChild.start();
    }
    return client;
  }

  private startStream(running: RunningTarget, instance: PostgresInstance, batcher: Batcher, writer: StoreWriter): void {
    const target = running.streams;
    const name = target.name;
    const controller = new AbortController();
    this.streamAborts.set(streamKeyOf(name, instance.name), controller);
    const hooks = streamHooks(this.o.metrics, this.o.log, name, instance.name);
    const metrics = this.o.metrics;
    const observed = running.observed;
    const epoch = running.epoch;
    const stream = new InstanceStream({
      target: name,
      instance: instance.name,
      format: instance.logFormat,
      prefix: instance.logLinePrefix,
      encodings: { defaultEncoding: instance.encodings.default, databases: instance.encodings.databases },
      maxEntryBytes: this.o.config.maxEntryBytes,
      templates: this.templates,
      follower: target.follower(instance),
      batcher,
      statementRows: writer.statementRows(),
      claim: () => (epoch === null ? writer.claim(name, instance.name) : writer.claim(name, instance.name, epoch)),
      storeStart: (start, claimed) => writer.storeStart(start, claimed),
      hooks: observedHooks(observed, instance.name, {
        ...hooks,
        progress(delta, tally, where) {
          target.meter.add(delta.bytes);
          if (target.transport === 'proxy') metrics.fifoBytes(name, instance.name, delta.bytes);
          hooks.progress?.(delta, tally, where);
        },
        backlog(deltaBytes) {
          // With the bytes read, what the server wrote: a catch-up does not look like a hot log.
          target.meter.add(deltaBytes);
        },
        failed(error, delayMs, position) {
          if (target.transport === 'proxy') metrics.sidecarStreamRestart(name);
          hooks.failed?.(error, delayMs, position);
        },
      }),
    });
    target.add(instance.name, stream);
    const log = this.o.log;
    const signal = AbortSignal.any([this.abort.signal, running.abort.signal, controller.signal]);
    const run = stream.run(signal).catch((e: unknown) => {
      // Only a fence ends a stream: another collector owns it now. In cluster mode that is the
      // operator moving the target (not an error); standalone, another process took it over.
      observed.failed(instance.name, e);
      const code = isPglogError(e) ? e.code : undefined;
      const level = code === 'STORE_FENCED' ? (epoch === null ? 'warn' : 'info') : 'error';
      log[level]({ target: name, instance: instance.name, err: e, code }, `${name}/${instance.name}: stream stopped: ${(e as Error).message}`);
    });
    running.runs.push(run);
    this.runs.add(run);
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
    await settleWithin(Promise.allSettled([...this.runs]), left() / 2);
    await settleWithin(this.control ?? undefined, left() / 2);
    await this.batcher?.stop(deadline);
    await settleWithin(this.snapshotSink?.flush(), left());
    await settleWithin(Promise.allSettled([...this.running.values()].flatMap((r) => r.sql.map((q) => q.close()))), left());
    await settleWithin(this.connections.closeAll(), left());
    await settleWithin(this.sidecar?.close(), left());
    await settleWithin(this.sidecarChild?.stop(Math.min(2000, left())), left());
    if (this.privateDir !== null) await rm(this.privateDir, { recursive: true, force: true }).catch(() => undefined);
    await this.maintenance;
    await settleWithin(this.writer?.close(), left());
  }
}
