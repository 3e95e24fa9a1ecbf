/**
 * Kubernetes Events about our objects (core/v1, so `kubectl describe` shows them), aggregated
 * like client-go's recorder: the same (object, type, reason, note) within 10 minutes bumps
 * `count` and `lastTimestamp` of the Event already written instead of writing another.
 * Recording never throws: an event is worth less than the reconcile that reports it.
 */
import { randomBytes } from 'node:crypto';

import type { KubeClient, KubeObject, ResourceType } from './client-types.ts';
import { isKubeError } from './errors.ts';

/** core/v1 Events (resources.ts's EVENTS is events.k8s.io/v1, which has no count). */
export const CORE_EVENTS: ResourceType = { group: '', version: 'v1', plural: 'events', kind: 'Event', namespaced: true };

export interface CoreEvent extends KubeObject {
  involvedObject: { apiVersion: string; kind: string; name: string; namespace?: string; uid?: string; resourceVersion?: string };
  reason: string;
  message: string;
  type: 'Normal' | 'Warning';
  source: { component: string; host?: string };
  reportingComponent: string;
  reportingInstance: string;
  firstTimestamp: string;
  lastTimestamp: string;
  count: number;
}

export type EventLog = (level: 'debug' | 'info' | 'warn' | 'error', msg: string, fields: Record<string, unknown>) => void;

export interface EventRecorderOptions {
  /** The reporting component (`pglog-operator`). */
  component: string;
  /** This instance (pod name). */
  instance: string;
  log?: EventLog;
  clock?: { now(): number };
  /** Same events within this window are counted on one Event. Default 10 minutes. */
  aggregateWindowMs?: number;
}

/** The API caps messages; a longer note is cut with a mark. */
const MAX_NOTE = 1024;
/** Aggregation entries kept at most; the oldest go first. */
const MAX_TRACKED = 4096;

interface Tracked {
  namespace: string;
  name: string;
  count: number;
  lastAt: number;
}

/** Seconds-precision RFC 3339, the format of core/v1 Event timestamps. */
function timestamp(ms: number): string {
  return new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');
}

export class EventRecorder {
  private readonly client: KubeClient;
  private readonly component: string;
  private readonly instance: string;
  private readonly log: EventLog;
  private readonly clock: { now(): number };
  private readonly windowMs: number;
  /** Aggregation key → the Event written for it (Map order: least recently used first). */
  private readonly tracked = new Map<string, Tracked>();
  /** One write at a time per key, so two quick records count instead of creating two Events. */
  private readonly inFlight = new Map<string, Promise<void>>();

  constructor(client: KubeClient, options: EventRecorderOptions) {
    this.client = client;
    this.component = options.component;
    this.instance = options.instance;
    this.log = options.log ?? (() => undefined);
    this.clock = options.clock ?? { now: () => Date.now() };
    this.windowMs = options.aggregateWindowMs ?? 10 * 60_000;
  }

  async record(regarding: KubeObject, type: 'Normal' | 'Warning', reason: string, note: string): Promise<void> {
    const message = note.length > MAX_NOTE ? `${note.slice(0, MAX_NOTE - 3)}...` : note;
    const m = regarding.metadata;
    const key = JSON.stringify([regarding.apiVersion, regarding.kind, m.namespace ?? '', m.name, m.uid ?? '', type, reason, message]);
    const previous = this.inFlight.get(key) ?? Promise.resolve();
    const write = previous.then(() => this.write(key, regarding, type, reason, message));
    this.inFlight.set(key, write);
    try {
      await write;
    } finally {
      if (this.inFlight.get(key) === write) this.inFlight.delete(key);
    }
  }

  private async write(key: string, regarding: KubeObject, type: 'Normal' | 'Warning', reason: string, message: string): Promise<void> {
    const now = this.clock.now();
    const m = regarding.metadata;
    const fields = { regarding: `${regarding.kind} ${m.namespace ?? ''}/${m.name}`, reason };
    try {
      const seen = this.tracked.get(key);
      if (seen !== undefined && now - seen.lastAt < this.windowMs) {
        try {
          await this.client.mergePatch(CORE_EVENTS, seen.namespace, seen.name, { count: seen.count + 1, lastTimestamp: timestamp(now) });
          seen.count++;
          seen.lastAt = now;
          this.touch(key, seen);
          return;
        } catch (e) {
          // The Event expired (the API server keeps them an hour by default): write a new one.
          if (!isKubeError(e, 'KUBE_NOT_FOUND')) throw e;
        }
      }
      // Events of cluster-scoped objects go to `default`, as kubectl looks for them there.
      const namespace = m.namespace !== undefined && m.namespace !== '' ? m.namespace : 'default';
      const event: CoreEvent = {
        apiVersion: 'v1',
        kind: 'Event',
        metadata: { name: `${m.name.slice(0, 200)}.${now.toString(16)}${randomBytes(3).toString('hex')}`, namespace },
        involvedObject: {
          apiVersion: regarding.apiVersion,
          kind: regarding.kind,
          name: m.name,
          ...(m.namespace !== undefined ? { namespace: m.namespace } : {}),
          ...(m.uid !== undefined ? { uid: m.uid } : {}),
          ...(m.resourceVersion !== undefined ? { resourceVersion: m.resourceVersion } : {}),
        },
        reason,
        message,
        type,
        source: { component: this.component, host: this.instance },
        reportingComponent: this.component,
        reportingInstance: this.instance,
        firstTimestamp: timestamp(now),
        lastTimestamp: timestamp(now),
        count: 1,
      };
      const created = await this.client.create(CORE_EVENTS, event);
      this.touch(key, { namespace, name: created.metadata.name, count: 1, lastAt: now });
    } catch (e) {
      this.log('warn', 'could not record a Kubernetes Event', { ...fields, error: e instanceof Error ? e.message : String(e) });
    }
  }

  private touch(key: string, entry: Tracked): void {
    this.tracked.delete(key);
    this.tracked.set(key, entry);
    if (this.tracked.size > MAX_TRACKED) {
      const oldest = this.tracked.keys().next();
      if (oldest.done !== true) this.tracked.delete(oldest.value);
    }
  }
}
