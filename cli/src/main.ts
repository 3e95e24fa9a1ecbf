/**
 * The `pglog` command's entry point: the only place that reads process.argv, process.env
 * and the standard streams; everything below receives its configuration as arguments.
 */
import { readFileSync } from 'node:fs';
import { enableCompileCache } from 'node:module';
import { join } from 'node:path';

import { isPglogError } from '@pglog/common/errors.ts';

/**
 * Where Node keeps the code it compiled for pglog's modules: NODE_COMPILE_CACHE when set (Node
 * then enabled the cache before this ran), else pglog's directory in the user's cache
 * directory; none without a home directory. Loading a command's modules with the cache warm
 * cost `pglog parse` of an empty file 0.06 s of CPU instead of 0.22 s (type stripping and
 * compiling are what it saves); the cache checks each module's source, so an edited module is
 * compiled again, and a directory that cannot be written leaves pglog running without it.
 */
function compileCacheDir(env: NodeJS.ProcessEnv): string | undefined {
  if (env.NODE_COMPILE_CACHE !== undefined && env.NODE_COMPILE_CACHE !== '') return env.NODE_COMPILE_CACHE;
  const base =
    env.XDG_CACHE_HOME !== undefined && env.XDG_CACHE_HOME !== ''
      ? env.XDG_CACHE_HOME
      : env.HOME !== undefined && env.HOME !== ''
        ? join(env.HOME, '.cache')
        : undefined;
  return base === undefined ? undefined : join(base, 'pglog', 'node-compile-cache');
}

// Before any command's module is loaded; NODE_DISABLE_COMPILE_CACHE=1 turns it off.
const cacheDir = compileCacheDir(process.env);
if (cacheDir !== undefined) enableCompileCache(cacheDir);

/**
 * Each command's module is loaded when that command runs, not at start-up: loading (and type
 * stripping) every command's dependencies (ssh2, pg, the Kubernetes client, ...) cost
 * `pglog parse` about 0.35 s of CPU before its first byte, against about 0.15 s for its own.
 */
const load = {
  collect: () => import('./collect-command.ts'),
  crds: () => import('./crds-command.ts'),
  operator: () => import('./operator-command.ts'),
  parse: () => import('./parse-command.ts'),
  report: () => import('./report-command.ts'),
  sshproxy: () => import('./sshproxy-command.ts'),
};

/** The whole usage text (every command's module loaded: only for help and mistakes). */
async function usageText(): Promise<string> {
  const [{ COLLECT_USAGE }, { REPORT_USAGE }, { PARSE_USAGE }, { SSHPROXY_USAGE }, { OPERATOR_USAGE }, { CRDS_USAGE }] = await Promise.all([
    load.collect(),
    load.report(),
    load.parse(),
    load.sshproxy(),
    load.operator(),
    load.crds(),
  ]);
  return `usage: pglog COMMAND [OPTIONS]

commands:
  collect   stream the logs of the servers in a targets file (or a CollectorShard) over SSH into the store
  report    top query templates, errors and lock waits from the store;
            report locks | report activity: blocking trees and sessions from SQL snapshots
  parse     parse PostgreSQL log files offline (summary or typed events)
  sshproxy  the sidecar that runs OpenSSH connections and streams for the collector
  operator  the Kubernetes operator: shards targets over collector pods, writes CollectorShards
  crds      crds apply: puts pglog's CRDs into the cluster (the chart's install/upgrade hook)

${COLLECT_USAGE}

${REPORT_USAGE}

${PARSE_USAGE}

${SSHPROXY_USAGE}

${OPERATOR_USAGE}

${CRDS_USAGE}`;
}

/** Usage of the commands whose parsers have no help of their own (`report` answers its own, per subcommand). */
const COMMAND_USAGE: Readonly<Record<string, () => Promise<string>>> = {
  collect: async () => (await load.collect()).COLLECT_USAGE,
  parse: async () => (await load.parse()).PARSE_USAGE,
  sshproxy: async () => (await load.sshproxy()).SSHPROXY_USAGE,
  operator: async () => (await load.operator()).OPERATOR_USAGE,
  crds: async () => (await load.crds()).CRDS_USAGE,
};

/**
 * `--help` or `-h` among a command's options (not after `--`, where it would be a file name).
 * Checked before parsing, so help never trips over a missing required option.
 */
function asksForHelp(args: readonly string[]): boolean {
  for (const arg of args) {
    if (arg === '--') return false;
    if (arg === '--help' || arg === '-h') return true;
  }
  return false;
}

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  const usage = command === undefined ? undefined : COMMAND_USAGE[command];
  if (usage !== undefined && asksForHelp(rest)) {
    process.stdout.write(`${await usage()}\n`);
    return 0;
  }
  switch (command) {
    case 'parse': {
      const { parseParseArgs, runParse } = await load.parse();
      return runParse(parseParseArgs(rest), { stdin: process.stdin, stdout: process.stdout, stderr: process.stderr });
    }
    case 'report': {
      const { parseReportArgs, runReport } = await load.report();
      return runReport(parseReportArgs(rest, process.env), { stdout: process.stdout, stderr: process.stderr });
    }
    case 'collect': {
      const { parseCollectArgs, runCollect } = await load.collect();
      return runCollect(
        parseCollectArgs(rest, process.env, (f) => readFileSync(f, 'utf8')),
        {
          stdout: process.stdout,
          onStopRequest: (handler) => {
            process.once('SIGTERM', () => handler('SIGTERM'));
            process.once('SIGINT', () => handler('SIGINT'));
          },
          onReloadRequest: (handler) => {
            process.on('SIGHUP', handler);
          },
          selfCommand: [process.execPath, ...process.execArgv, process.argv[1]!],
          collectArgs: rest,
          env: process.env,
        },
      );
    }
    case 'sshproxy': {
      const { parseSshproxyArgs, runSshproxy } = await load.sshproxy();
      const config = parseSshproxyArgs(rest);
      return runSshproxy(config, {
        stdout: process.stdout,
        onStopRequest: (handler) => {
          process.once('SIGTERM', () => handler('SIGTERM'));
          process.once('SIGINT', () => handler('SIGINT'));
          if (config.stopOnStdinEof) {
            // The parent holds the other end of this pipe; the kernel closes it when the parent dies.
            process.stdin.once('end', () => handler('standard input ended (the parent process is gone)'));
            process.stdin.once('error', () => handler('standard input failed (the parent process is gone)'));
            process.stdin.resume();
          }
        },
      });
    }
    case 'crds': {
      const { parseCrdsArgs, runCrdsCommand } = await load.crds();
      return runCrdsCommand(parseCrdsArgs(rest, process.env), process.stdout);
    }
    case 'operator': {
      const { parseOperatorArgs, runOperatorCommand } = await load.operator();
      return runOperatorCommand(parseOperatorArgs(rest, process.env), {
        stdout: process.stdout,
        onStopRequest: (handler) => {
          process.once('SIGTERM', handler);
          process.once('SIGINT', handler);
        },
      });
    }
    case undefined:
    case 'help':
    case '--help':
    case '-h':
      process.stdout.write(`${await usageText()}\n`);
      return command === undefined ? 2 : 0;
    default:
      process.stderr.write(`pglog: unknown command '${command}'\n${await usageText()}\n`);
      return 2;
  }
}

// An early-closed stdout (`pglog parse --events | head`) is not an error worth a stack trace.
process.stdout.on('error', (e: NodeJS.ErrnoException) => {
  // The sidecar whose parent died must still stop its ssh processes: its log is lost, not its clean-up.
  if (e.code === 'EPIPE' && process.argv[2] === 'sshproxy') return;
  if (e.code === 'EPIPE') process.exit(0);
  throw e;
});

try {
  process.exitCode = await main(process.argv.slice(2));
  // A collector that has flushed and closed what it could exits now, even if a socket of a
  // frozen server still lingers: the stop deadline is a promise to the process supervisor.
  // The sidecar likewise exits once its children are gone and its last status is written.
  if (process.argv[2] === 'collect' || process.argv[2] === 'sshproxy') process.exit();
} catch (e) {
  if (isPglogError(e)) {
    process.stderr.write(`pglog: ${e.message}\n`);
    process.exitCode = e.code === 'USAGE' ? 2 : 1;
  } else {
    throw e;
  }
}
