// Shared pieces of the `pglog collect` integration tests that run the real CLI against a real
// sshd, a real logging PostgreSQL and a real store: one target set up end to end, the
// collector's memory from /proc, its /metrics scraped and parsed, and a check that no secret
// it was given (the store password, the SSH private key) shows up in what it wrote.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { type CollectorProcess, mainInstance, sshTarget, startCollector, writeTargetsFile } from './collector-process.ts';
import { type LogServer, type LogServerOptions, startLogServer } from './log-server.ts';
import { startPostgres, type TestPostgres } from './postgres.ts';
import { startSshServer, type TestSshServer } from './sshd.ts';

export { freePort } from './wait.ts';

export interface ProcessMemory {
  /** VmRSS: resident now. */
  rssBytes: number;
  /** VmHWM: the highest resident size the process ever had. */
  peakRssBytes: number;
}

/** Resident memory of a live process from /proc/PID/status (Linux); null once it has exited. */
export function processMemory(pid: number): ProcessMemory | null {
  let status: string;
  try {
    status = readFileSync(`/proc/${pid}/status`, 'utf8');
  } catch {
    return null;
  }
  const kb = (field: string): number => {
    const m = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status);
    return m === null ? NaN : Number(m[1]) * 1024;
  };
  return { rssBytes: kb('VmRSS'), peakRssBytes: kb('VmHWM') };
}

export const MiB = 1024 * 1024;

export function mib(bytes: number): string {
  return `${(bytes / MiB).toFixed(1)} MiB`;
}

/** GET http://host:port/metrics (Prometheus text). */
export async function scrapeMetrics(port: number, host = '127.0.0.1', timeoutMs = 5_000): Promise<string> {
  const response = await fetch(`http://${host}:${port}/metrics`, { signal: AbortSignal.timeout(timeoutMs) });
  if (!response.ok) throw new Error(`GET /metrics on ${host}:${port}: HTTP ${response.status}`);
  return response.text();
}

export interface MetricSample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** The samples of a Prometheus text exposition (comments skipped). */
export function parseMetrics(text: string): MetricSample[] {
  const samples: MetricSample[] = [];
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)/.exec(line);
    if (m === null) continue;
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? '').matchAll(/\b([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) {
      labels[l[1]!] = l[2]!.replace(/\\n/g, '\n').replace(/\\(.)/g, '$1');
    }
    samples.push({ name: m[1]!, labels, value: Number(m[3]) });
  }
  return samples;
}

/** Sum of the samples of metric `name` whose labels include `labels`. */
export function metricSum(text: string, name: string, labels: Record<string, string> = {}): number {
  let sum = 0;
  for (const s of parseMetrics(text)) {
    if (s.name !== name) continue;
    if (Object.entries(labels).every(([k, v]) => s.labels[k] === v)) sum += s.value;
  }
  return sum;
}

/** `postgresql://user@...` with a password added: `postgresql://user:password@...`. */
export function withPassword(url: string, password: string): string {
  const m = /^(postgres(?:ql)?:\/\/)([^:@/?]+)@/.exec(url);
  if (m === null) throw new Error(`withPassword: expected postgresql://user@..., got ${url}`);
  return `${m[1]}${m[2]}:${encodeURIComponent(password)}@${url.slice(m[0].length)}`;
}

/** The base64 body lines of a PEM / OpenSSH private key file (without the BEGIN/END lines). */
export function privateKeyBodyLines(privateKeyFile: string): string[] {
  return readFileSync(privateKeyFile, 'utf8')
    .split(/\r?\n/)
    .map((l) => l.trim())
    .filter((l) => l.length > 0 && !l.startsWith('-----'));
}

/**
 * Where a secret shows up in `output`: each password, and each base64 line of each private
 * key file. An empty list means nothing leaked.
 */
export function leakedSecrets(output: string, secrets: { passwords?: readonly string[]; privateKeyFiles?: readonly string[] }): string[] {
  const leaks: string[] = [];
  const context = (at: number): string => JSON.stringify(output.slice(Math.max(0, at - 120), at + 120));
  for (const password of secrets.passwords ?? []) {
    for (const form of new Set([password, encodeURIComponent(password)])) {
      const at = output.indexOf(form);
      if (at !== -1) leaks.push(`the password ${JSON.stringify(form)} at ${at}: ${context(at)}`);
    }
  }
  for (const file of secrets.privateKeyFiles ?? []) {
    const lines = privateKeyBodyLines(file);
    if (lines.length === 0) leaks.push(`(the private key file ${file} has no body lines: nothing was checked)`);
    for (const [i, line] of lines.entries()) {
      const at = output.indexOf(line);
      if (at !== -1) leaks.push(`line ${i + 1} of the private key ${file} at ${at}: ${context(at)}`);
    }
  }
  return leaks;
}

export interface CollectScenario {
  /** A private temporary directory (targets file, collector output). */
  readonly work: string;
  readonly store: TestPostgres;
  readonly ssh: TestSshServer;
  /** The monitored PostgreSQL (target db1, instance main). */
  readonly server: LogServer;
  readonly targetsFile: string;
  /** Where every collector run of the scenario writes its output (appended). */
  readonly outputFile: string;
  /** Starts `pglog collect` on the targets file (default store URL: store.url). */
  startCollector(args?: string[], storeUrl?: string): CollectorProcess;
  /** SIGKILLs a collector still running, stops the servers, removes the directory. */
  dispose(): Promise<void>;
}

/**
 * A store, an sshd and a logging PostgreSQL, with a targets file naming that PostgreSQL as
 * target `db1`, instance `main` (stderr format and prefix unless `logServer` says otherwise).
 */
export async function startCollectScenario(options: { name: string; logServer?: LogServerOptions }): Promise<CollectScenario> {
  const work = mkdtempSync(join(tmpdir(), `pglog-${options.name}-`));
  const started = await Promise.allSettled([startPostgres(), startSshServer(), startLogServer(options.logServer ?? {})]);
  const [s, h, l] = started;
  if (s.status === 'rejected' || h.status === 'rejected' || l.status === 'rejected') {
    await Promise.allSettled([
      s.status === 'fulfilled' ? s.value.stop() : undefined,
      h.status === 'fulfilled' ? h.value.dispose() : undefined,
      l.status === 'fulfilled' ? l.value.dispose() : undefined,
    ]);
    rmSync(work, { recursive: true, force: true });
    const failed = started.find((r) => r.status === 'rejected');
    throw (failed as PromiseRejectedResult).reason;
  }
  const store = s.value;
  const ssh = h.value;
  const server = l.value;
  const format = options.logServer?.logFormat ?? 'stderr';
  const targetsFile = writeTargetsFile(work, [
    sshTarget('db1', ssh, server, {
      instances: [
        mainInstance(server, {
          logFormat: format,
          ...(options.logServer?.logLinePrefix !== undefined ? { logLinePrefix: options.logServer.logLinePrefix } : {}),
        }),
      ],
    }),
  ]);
  const outputFile = join(work, 'collector.log');
  const running = new Set<CollectorProcess>();
  return {
    work,
    store,
    ssh,
    server,
    targetsFile,
    outputFile,
    startCollector(args = [], storeUrl = store.url) {
      const c = startCollector({ targetsFile, storeUrl, args, outputFile });
      running.add(c);
      void c.exited.then(() => running.delete(c));
      return c;
    },
    async dispose() {
      for (const c of running) c.kill('SIGKILL');
      await Promise.allSettled([...running].map((c) => c.exited));
      await Promise.allSettled([ssh.dispose(), server.dispose(), store.stop()]);
      rmSync(work, { recursive: true, force: true });
    },
  };
}
