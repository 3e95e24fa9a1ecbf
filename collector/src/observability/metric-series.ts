/**
 * The series of one target and of one instance: they write the collector's metric objects
 * (instruments.ts) and remember the label values they used, so that a target that left the
 * shard can have every one of its series removed (prom-client removes a series only by its
 * full label set).
 */
import type { ErrorLabel } from '@pglog/common/errors.ts';

import { EVENT_KINDS, type EventKind } from '../logformat/events.ts';
import { type Instruments, type ParseProblem, TRANSPORTS } from './instruments.ts';
import type { SqlstateClass } from './sqlstate-class.ts';

type InstanceLabels = { target: string; instance: string };

/** The label set kept in `cache` for `key`, made the first time it is asked for: one object a series, which remove() finds again. */
function cachedLabels<K, L>(cache: Map<K, L>, key: K, make: () => L): L {
  let labels = cache.get(key);
  if (labels === undefined) {
    labels = make();
    cache.set(key, labels);
  }
  return labels;
}

/** The series of one instance, and the label values it used (to remove them all later). */
export class InstanceSeries {
  private readonly m: Instruments;
  readonly labels: InstanceLabels;
  private readonly kindLabels = new Map<EventKind, InstanceLabels & { kind: EventKind }>();
  private readonly problemLabels = new Map<ParseProblem, InstanceLabels & { problem: ParseProblem }>();
  private readonly classLabels = new Map<SqlstateClass, InstanceLabels & { sqlstate_class: SqlstateClass }>();
  newestCommittedMs: number | null = null;

  constructor(m: Instruments, target: string, instance: string) {
    this.m = m;
    this.labels = { target, instance };
    // Every kind from zero: a rare event (a deadlock) shows in rate() and increase() from its
    // first occurrence, which a series born at 1 would hide.
    for (const kind of EVENT_KINDS) this.m.events.inc(this.kind(kind), 0);
  }

  kind(kind: EventKind): InstanceLabels & { kind: EventKind } {
    return cachedLabels(this.kindLabels, kind, () => ({ ...this.labels, kind }));
  }

  problem(problem: ParseProblem): InstanceLabels & { problem: ParseProblem } {
    return cachedLabels(this.problemLabels, problem, () => ({ ...this.labels, problem }));
  }

  sqlstateClass(cls: SqlstateClass): InstanceLabels & { sqlstate_class: SqlstateClass } {
    return cachedLabels(this.classLabels, cls, () => ({ ...this.labels, sqlstate_class: cls }));
  }

  /** Called at scrape time: lag_seconds keeps growing while nothing is committed. */
  updateLagSeconds(nowMs: number): void {
    if (this.newestCommittedMs === null) this.m.lagSeconds.remove(this.labels);
    else this.m.lagSeconds.set(this.labels, Math.max(0, (nowMs - this.newestCommittedMs) / 1000));
  }

  remove(): void {
    for (const metric of [this.m.readBytes, this.m.readLines, this.m.slowEntries, this.m.skippedBytes, this.m.lagBytes, this.m.lagSeconds, this.m.fifoBytes]) {
      metric.remove(this.labels);
    }
    for (const labels of this.kindLabels.values()) this.m.events.remove(labels);
    for (const labels of this.problemLabels.values()) this.m.parseProblems.remove(labels);
    for (const labels of this.classLabels.values()) this.m.logErrors.remove(labels);
  }
}

/** The series of one target, and the error codes it used. */
export class TargetSeries {
  private readonly m: Instruments;
  readonly labels: { target: string };
  private readonly codeLabels = new Map<ErrorLabel, { target: string; code: ErrorLabel }>();
  pendingBytes = 0;

  constructor(m: Instruments, target: string) {
    this.m = m;
    this.labels = { target };
  }

  code(code: ErrorLabel): { target: string; code: ErrorLabel } {
    return cachedLabels(this.codeLabels, code, () => ({ target: this.labels.target, code }));
  }

  remove(): void {
    this.m.connected.remove(this.labels);
    this.m.pendingBytesTarget.remove(this.labels);
    this.m.reconnects.remove(this.labels);
    for (const metric of [this.m.rate, this.m.promotions, this.m.demotions, this.m.sidecarRestarts]) metric.remove(this.labels);
    for (const t of TRANSPORTS) this.m.transport.remove({ target: this.labels.target, transport: t });
    for (const labels of this.codeLabels.values()) this.m.errors.remove(labels);
  }
}
