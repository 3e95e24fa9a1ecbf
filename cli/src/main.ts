/**
 * The `pglog` command's entry point: the only place that reads process.argv, process.env
 * and the standard streams; everything below receives its configuration as arguments.
 */
import { readFileSync } from 'node:fs';

import { isPglogError } from '@pglog/common/errors.ts';

import { COLLECT_USAGE, parseCollectArgs, runCollect } from './collect-command.ts';
import { CRDS_USAGE, parseCrdsArgs, runCrdsCommand } from './crds-command.ts';
import { OPERATOR_USAGE, parseOperatorArgs, runOperatorCommand } from './operator-command.ts';
import { PARSE_USAGE, parseParseArgs, runParse } from './parse-command.ts';
import { parseReportArgs, REPORT_USAGE, runReport } from './report-command.ts';
import { parseSshproxyArgs, runSshproxy,SSHPROXY_USAGE } from './sshproxy-command.ts';

const USAGE = `usage: pglog COMMAND [OPTIONS]

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

/** Usage of the commands whose parsers have no help of their own (`report` answers its own, per subcommand). */
const COMMAND_USAGE: Readonly<Record<string, string>> = {
  collect: COLLECT_USAGE, parse: PARSE_USAGE, sshproxy: SSHPROXY_USAGE, operator: OPERATOR_USAGE, crds: CRDS_USAGE,
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
    process.stdout.write(`${usage}\n`);
    return 0;
  }
  switch (command) {
    case 'parse':
      return runParse(parseParseArgs(rest), { stdin: process.stdin, stdout: process.stdout, stderr: process.stderr });
    case 'report':
      return runReport(parseReportArgs(rest, process.env), { stdout: process.stdout, stderr: process.stderr });
    case 'collect':
      return runCollect(parseCollectArgs(rest, process.env, (f) => readFileSync(f, 'utf8')), {
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
      });
    case 'sshproxy': {
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
    case 'crds':
      return runCrdsCommand(parseCrdsArgs(rest, process.env), process.stdout);
    case 'operator':
      return runOperatorCommand(parseOperatorArgs(rest, process.env), {
        stdout: process.stdout,
        onStopRequest: (handler) => {
          process.once('SIGTERM', handler);
          process.once('SIGINT', handler);
        },
      });
    case undefined:
    case 'help':
    case '--help':
    case '-h':
      process.stdout.write(`${USAGE}\n`);
      return command === undefined ? 2 : 0;
    default:
      process.stderr.write(`pglog: unknown command '${command}'\n${USAGE}\n`);
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
