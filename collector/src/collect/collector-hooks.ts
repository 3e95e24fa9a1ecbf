/**
 * What the collector's parts report, turned into metrics and log lines: one place that knows
 * both the hook shapes and the metric names, so streams and the batcher stay free of either.
 */
import type { ErrorLabel } from '@pglog/common/errors.ts';
import { isPglogError } from '@pglog/common/errors.ts';
import type { Logger } from '@pglog/common/observability/logger.ts';

import type { ParseCounters } from '../logformat/log-parser.ts';
import type { CollectorMetrics } from '../observability/metrics.ts';
import type { BatcherHooks } from './batcher.ts';
import type { EventTally, StreamHooks } from './instance-stream.ts';

/** Bad-input warnings of one stream: at most one per this interval (the counts add up). */
const PROBLEM_LOG_INTERVAL_MS = 10_000;

const codeOf = (e: unknown): ErrorLabel => (isPglogError(e) ? e.code : 'UNKNOWN');

/** A stream's progress in the metrics: bytes, lines, events by kind, errors by class, parse problems. */
function countProgress(metrics: CollectorMetrics, target: string, instance: string, delta: ParseCounters, tally: EventTally): void {
  metrics.readBytes(target, instance, delta.bytes);
  metrics.readLines(target, instance, delta.lines);
  for (const [kind, n] of tally.kinds) metrics.events(target, instance, kind, n);
  for (const [cls, n] of tally.errorClasses) metrics.logErrors(target, instance, cls, n);
  if (delta.malformed > 0) metrics.parseProblems(target, instance, 'malformed', delta.malformed);
  if (delta.truncated > 0) metrics.parseProblems(target, instance, 'truncated', delta.truncated);
  if (delta.replacements > 0) metrics.parseProblems(target, instance, 'replacement', delta.replacements);
  if (delta.nulRemoved > 0) metrics.parseProblems(target, instance, 'nul_removed', delta.nulRemoved);
  if (delta.oversized > 0) metrics.parseProblems(target, instance, 'oversized', delta.oversized);
}

export function streamHooks(metrics: CollectorMetrics, log: Logger, target: string, instance: string): StreamHooks {
  const tlog = log.child({ target, instance });
  let paused = false;
  let lastFailure = '';
  // Bad input is counted in metrics and told in the log, at most once per interval per stream.
  let problemsSince = { truncated: 0, malformed: 0, replacements: 0, nulRemoved: 0 };
  let problemsLoggedAt = 0;
  let slowSince = 0;
  let slowLoggedAt = 0;
  return {
    progress(delta, tally, where) {
      countProgress(metrics, target, instance, delta, tally);
      if (delta.truncated + delta.malformed + delta.replacements + delta.nulRemoved === 0) return;
      problemsSince = {
        truncated: problemsSince.truncated + delta.truncated,
        malformed: problemsSince.malformed + delta.malformed,
        replacements: problemsSince.replacements + delta.replacements,
        nulRemoved: problemsSince.nulRemoved + delta.nulRemoved,
      };
      const now = Date.now();
      if (now - problemsLoggedAt < PROBLEM_LOG_INTERVAL_MS) return;
      problemsLoggedAt = now;
      const p = problemsSince;
      problemsSince = { truncated: 0, malformed: 0, replacements: 0, nulRemoved: 0 };
      tlog.warn(
        { ...p, file: where.file, offset: where.offset },
        `${target}/${instance}: bad input in ${where.file} before byte ${where.offset}: ` +
          `${p.truncated} entries cut at --max-entry-bytes, ${p.malformed} malformed lines kept as 'other', ${p.replacements} invalid byte sequences replaced, ${p.nulRemoved} NUL bytes removed; the entries are stored`,
      );
    },
    lag(bytes) {
      metrics.lagBytes(target, instance, bytes);
    },
    slowEntry(file, entry) {
      metrics.slowEntries(target, instance);
      // Each costs the budget at least, yet a flood of them must not flood the log: one a while.
      slowSince++;
      const now = Date.now();
      if (now - slowLoggedAt < PROBLEM_LOG_INTERVAL_MS) return;
      slowLoggedAt = now;
      const count = slowSince;
      slowSince = 0;
      tlog.warn(
        { file, offset: entry.offset, end: entry.end, ms: Math.round(entry.ms), budgetMs: Math.round(entry.budgetMs), count },
        `${target}/${instance}: the entry at byte ${entry.offset} of ${file} took the parser ${Math.round(entry.ms)} ms (budget ${Math.round(entry.budgetMs)} ms); ` +
          `${count} such entries since the last warning, counted in pglog_parse_slow_entries_total; the entry is stored`,
      );
    },
    connected(up) {
      if (up && lastFailure !== '') tlog.info(`${target}/${instance}: reading again`);
      if (up) lastFailure = '';
    },
    failed(error, delayMs, position) {
      const code = codeOf(error);
      metrics.error(target, code);
      const message = (error as Error).message;
      // The same failure over and over (a host that stays down) is logged once, then at debug.
      const level = message === lastFailure ? 'debug' : 'warn';
      lastFailure = message;
      // Errors of the follower already name the stream; the transport's name the server.
      const where = message.startsWith(`${target}/${instance}:`) ? '' : `${target}/${instance}: `;
      tlog[level]({ code, retryInMs: delayMs, file: position?.file.path, offset: position?.offset }, `${where}${message}; following again in ${delayMs} ms`);
    },
    gap(item) {
      if (item.bytes !== null) metrics.skippedBytes(target, instance, item.bytes);
      metrics.error(target, 'LOG_POSITION_LOST');
      tlog.error({ code: 'LOG_POSITION_LOST', file: item.file?.path, offset: item.fromOffset, bytes: item.bytes }, `${target}/${instance}: ${item.reason}`);
    },
    paused(on) {
      if (on === paused) return;
      paused = on;
      metrics.pausedStreams(on ? 1 : -1);
    },
    file(file, offset) {
      tlog.info({ file: file.path, offset }, `${target}/${instance}: reading ${file.path} from byte ${offset}`);
    },
    started(file, offset) {
      tlog.info({ file: file.path, offset }, `${target}/${instance}: never collected before: starts at byte ${offset} of ${file.path}, stored before reading`);
    },
  };
}

export function batcherHooks(metrics: CollectorMetrics, log: Logger, fence: (target: string, instance: string) => void): BatcherHooks {
  let failing = false;
  return {
    committed(result, info) {
      if (failing) log.info('store commits again');
      failing = false;
      metrics.batchCommitted(info.rows, info.bytes, result.copyMs / 1000, (Date.now() - info.oldestReadAt) / 1000);
      for (const n of info.newest) metrics.newestCommittedEntry(n.target, n.instance, n.ms);
      // The writer logs the reasons; here they are counted by table.
      for (const [table, rows] of Object.entries(result.quarantinedByTable ?? {})) metrics.quarantined(table, rows);
    },
    retrying(error, attempt, delayMs) {
      const code = codeOf(error);
      metrics.storeError(code);
      metrics.batchRetried();
      const level = failing ? 'debug' : 'warn';
      failing = true;
      log[level](
        { code, attempt, retryInMs: delayMs },
        delayMs < 0
          ? `store commit failed at stop: ${(error as Error).message}; the uncommitted part is read again at the next start`
          : `store commit failed: ${(error as Error).message}; retrying in ${delayMs} ms`,
      );
    },
    fenced(target, instance, epoch) {
      metrics.batchFenced();
      log.error(
        { target, instance, epoch, code: 'STORE_FENCED' },
        `${target}/${instance}: another collector took this stream over (epoch ${epoch}); stopping it here`,
      );
      fence(target, instance);
    },
  };
}
