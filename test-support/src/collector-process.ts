// Runs the real `pglog collect` as a child process (the launcher users run), with a targets
// file written for the test's SSH servers and PostgreSQL instances, and keeps its JSON log.
import { type ChildProcess, spawn } from 'node:child_process';
import { appendFileSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { PGLOG } from './cli.ts';

export interface TargetInstanceSpec {
  name: string;
  dataDirectory: string;
  logDirectory: string;
  logFormat?: 'stderr' | 'csvlog' | 'jsonlog';
  logLinePrefix?: string;
  encodings?: { default?: string; databases?: Record<string, string> };
  /** spec.instances[].sql, written as given (SQL snapshot tests). */
  sql?: { socketDirectory?: string; port?: number; database?: string; user?: string; timeoutSeconds?: number; allowSuperuser?: boolean };
}

export interface TargetSpec {
  name: string;
  host: string;
  port: number;
  user: string;
  privateKeyFile: string;
  knownHostsFile: string;
  /** spec.transport; default inproc (tests of other things keep to one transport). */
  transport?: 'auto' | 'inproc' | 'proxy';
  instances: TargetInstanceSpec[];
  /** spec.collect, written as given; default: logs only. */
  collect?: {
    logs?: boolean;
    activity?: boolean;
    locks?: boolean;
    statements?: boolean;
    databases?: boolean;
    intervalSeconds?: number;
    statisticsIntervalSeconds?: number;
  };
}

/** How a target logs in to a test SSH server (sshd.ts): its address, user and key files. */
export type SshLogin = Pick<TargetSpec, 'host' | 'port' | 'user' | 'privateKeyFile' | 'knownHostsFile'>;

/** The login fields of `ssh` alone (a test SSH server carries more). */
export const sshLogin = (ssh: SshLogin): SshLogin => ({
  host: ssh.host,
  port: ssh.port,
  user: ssh.user,
  privateKeyFile: ssh.privateKeyFile,
  knownHostsFile: ssh.knownHostsFile,
});

/** A log server's (log-server.ts) instance `main` in the default format and prefix; `over` replaces any field. */
export const mainInstance = (server: { dataDirectory: string; logDirectory: string }, over: Partial<TargetInstanceSpec> = {}): TargetInstanceSpec => ({
  name: 'main',
  dataDirectory: server.dataDirectory,
  logDirectory: server.logDirectory,
  ...over,
});

/** Target `name` reading instance `main` of `server` over `ssh`; `over` replaces any field. */
export const sshTarget = (
  name: string,
  ssh: SshLogin,
  server: { dataDirectory: string; logDirectory: string },
  over: Partial<TargetSpec> = {},
): TargetSpec => ({
  name,
  ...sshLogin(ssh),
  instances: [mainInstance(server)],
  ...over,
});

/** Writes a targets file (a YAML stream; JSON is YAML) into `dir` and returns its path. */
export function writeTargetsFile(dir: string, targets: readonly TargetSpec[]): string {
  const docs = targets.map((t) =>
    JSON.stringify(
      {
        apiVersion: 'pglog.io/v1alpha1',
        kind: 'PostgresTarget',
        metadata: { name: t.name },
        spec: {
          host: t.host,
          port: t.port,
          user: t.user,
          transport: t.transport ?? 'inproc',
          ssh: { privateKeyFile: t.privateKeyFile, knownHostsFile: t.knownHostsFile },
          instances: t.instances.map((i) => ({
            name: i.name,
            dataDirectory: i.dataDirectory,
            logDirectory: i.logDirectory,
            logFormat: i.logFormat ?? 'stderr',
            logLinePrefix: i.logLinePrefix ?? '%m [%p] %q%u@%d ',
            encodings: { default: i.encodings?.default ?? 'UTF8', databases: i.encodings?.databases ?? {} },
            ...(i.sql === undefined ? {} : { sql: i.sql }),
          })),
          ...(t.collect === undefined ? {} : { collect: t.collect }),
        },
      },
      null,
      2,
    ),
  );
  const file = join(dir, 'targets.yaml');
  writeFileSync(file, `${docs.join('\n---\n')}\n`);
  return file;
}

export interface CollectorProcess {
  readonly pid: number;
  /** Everything the process wrote so far (JSON log lines and any stderr), across restarts. */
  output(): string;
  /** The JSON log lines parsed (lines that are not JSON are skipped). */
  logRecords(): Array<Record<string, unknown>>;
  /** Resolves when the process has exited. */
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  kill(signal: NodeJS.Signals): void;
  /** SIGTERM, then the exit status and how long it took. */
  stop(): Promise<{ code: number | null; signal: NodeJS.Signals | null; ms: number }>;
}

export interface StartCollectorOptions {
  targetsFile: string;
  storeUrl: string;
  /** Extra `pglog collect` arguments. */
  args?: string[];
  /** File that collects the output of this and earlier runs (one per test). */
  outputFile?: string;
  /** More environment for the process (NODE_OPTIONS for a profile, say). */
  env?: Record<string, string>;
  /** The launcher to run (default: this tree's cli/bin/pglog; a benchmark's baseline: another checkout's). */
  pglog?: string;
}

/** What a child has written to `file`; '' before it wrote anything. */
export function readOutput(file: string): string {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return '';
  }
}

/** The JSON log records among a child's output lines (Node's warnings and the like are not JSON). */
export function jsonRecords(output: string): Array<Record<string, unknown>> {
  return output.split('\n').flatMap((line) => {
    if (!line.startsWith('{')) return [];
    try {
      return [JSON.parse(line) as Record<string, unknown>];
    } catch {
      return [];
    }
  });
}

/**
 * Whether a JSON log record is at error level or above. pglog writes the level's name
 * (`"level":"error"`, logger.ts); a number (pino's default, 50 and up) is taken too.
 */
export function isErrorRecord(record: Record<string, unknown>): boolean {
  const level = record['level'];
  return level === 'error' || level === 'fatal' || (typeof level === 'number' && level >= 50);
}

/** Starts `pglog collect`; the store URL goes through PGLOG_STORE_URL, as users should pass a password. */
export function startCollector(options: StartCollectorOptions): CollectorProcess {
  const outputFile = options.outputFile ?? join(mkdtempSync(join(tmpdir(), 'pglog-collect-')), 'output.log');
  const child: ChildProcess = spawn(
    options.pglog ?? PGLOG,
    ['collect', '--targets', options.targetsFile, '--listen', 'off', '--log-level', 'debug', ...(options.args ?? [])],
    {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, ...options.env, PGLOG_STORE_URL: options.storeUrl },
    },
  );
  const append = (b: Buffer): void => appendFileSync(outputFile, b);
  child.stdout!.on('data', append);
  child.stderr!.on('data', append);
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    child.on('close', (code, signal) => resolve({ code, signal }));
  });
  const output = (): string => readOutput(outputFile);
  return {
    pid: child.pid!,
    output,
    logRecords: () => jsonRecords(output()),
    exited,
    kill: (signal) => {
      child.kill(signal);
    },
    stop: async () => {
      const started = Date.now();
      child.kill('SIGTERM');
      const r = await exited;
      return { ...r, ms: Date.now() - started };
    },
  };
}

/** Polls `check` until it returns true; fails with `what` and the last detail after `timeoutMs`. */
export async function waitFor(
  check: () => Promise<boolean> | boolean,
  what: string,
  timeoutMs = 60_000,
  detail?: () => string | Promise<string>,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await check()) return;
    if (Date.now() > deadline) {
      const d = detail === undefined ? '' : `\n${await detail()}`;
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${d}`);
    }
    await new Promise((r) => setTimeout(r, 250));
  }
}

/** Waits until `c` has begun reading a log: its "TARGET/INSTANCE: reading FILE from byte N" line. */
export function untilReading(c: Pick<CollectorProcess, 'output'>, what = 'the collector to start reading'): Promise<void> {
  return waitFor(
    () => c.output().includes('reading '),
    what,
    60_000,
    () => c.output(),
  );
}
