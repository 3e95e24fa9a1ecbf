/**
 * `pglog sshproxy --dir DIR`: the sidecar that runs OpenSSH for the collector's `proxy`
 * transport (docs/sshproxy.md). Runs until SIGTERM/SIGINT (wired by main.ts), then kills
 * its streams and masters and exits 0.
 */
import { rm } from 'node:fs/promises';
import type { Writable } from 'node:stream';

import { Sidecar } from '@pglog/collector/sidecar/sidecar.ts';
import { PglogError } from '@pglog/common/errors.ts';
import { createLogger, type OptionLogLevel, parseLogLevelOption } from '@pglog/common/observability/logger.ts';

import { parseCommandArgs, stringOptions } from './command-args.ts';
import { wholeNumberOption } from './whole-number-option.ts';

export const SSHPROXY_USAGE = `usage: pglog sshproxy --dir DIR [--log-level LEVEL]
  Runs the OpenSSH connections and streams that the collector asks for in DIR/desired.json
  and reports them in DIR/status.json (a directory shared with the collector, see docs/sshproxy.md).
  --dir DIR                 the shared directory (absolute path at most 70 bytes long)
  --log-level LEVEL         trace|debug|info|warn|error (default info)
  --stop-on-stdin-eof       also stop when standard input ends: the parent that started it with a
                            pipe (pglog collect in standalone mode) is gone, even if it was SIGKILLed
  --remove-dir              remove DIR when stopping (a private directory of a parent process)`;

export interface SshproxyConfig {
  dir: string;
  logLevel: OptionLogLevel;
  /** Master restart delays (hidden options, for tests). */
  backoffBaseMs: number;
  backoffCapMs: number;
  stopOnStdinEof: boolean;
  removeDir: boolean;
}

/** `pglog sshproxy` arguments → configuration. */
export function parseSshproxyArgs(argv: string[]): SshproxyConfig {
  const { values } = parseCommandArgs(
    {
      args: argv,
      allowPositionals: false,
      options: {
        ...stringOptions('dir', 'log-level'),
        'stop-on-stdin-eof': { type: 'boolean' },
        'remove-dir': { type: 'boolean' },
        // Not in the usage text: tests shorten the master backoff with them.
        ...stringOptions('backoff-base-ms', 'backoff-cap-ms'),
      },
    },
    (message) => `sshproxy: ${message}`,
  );
  if (values.dir === undefined || values.dir === '') throw new PglogError('USAGE', 'sshproxy: --dir DIR is required');
  const logLevel = parseLogLevelOption(values['log-level'], 'sshproxy');
  const backoffBaseMs = count(values['backoff-base-ms'], '--backoff-base-ms', 1000);
  const backoffCapMs = count(values['backoff-cap-ms'], '--backoff-cap-ms', 30_000);
  if (backoffCapMs < backoffBaseMs)
    throw new PglogError('USAGE', `sshproxy: --backoff-cap-ms (${backoffCapMs}) must not be below --backoff-base-ms (${backoffBaseMs})`);
  return {
    dir: values.dir,
    logLevel,
    backoffBaseMs,
    backoffCapMs,
    stopOnStdinEof: values['stop-on-stdin-eof'] === true,
    removeDir: values['remove-dir'] === true,
  };
}

function count(text: string | undefined, flag: string, fallback: number): number {
  return wholeNumberOption('sshproxy', flag, text, fallback, 1);
}

export interface SshproxyIO {
  /** Where the JSON log goes (standard output). */
  stdout: Writable;
  /** Calls `handler` once when the process is asked to stop (with why, for the log). */
  onStopRequest(handler: (why: string) => void): void;
}

export async function runSshproxy(config: SshproxyConfig, io: SshproxyIO): Promise<number> {
  const log = createLogger({ level: config.logLevel, destination: io.stdout });
  let resolveStop!: (why: string) => void;
  const stopRequested = new Promise<string>((resolve) => {
    resolveStop = resolve;
  });
  io.onStopRequest((why) => resolveStop(why));
  const sidecar = await Sidecar.start({ dir: config.dir, log, backoff: { baseMs: config.backoffBaseMs, capMs: config.backoffCapMs } });
  const why = await stopRequested;
  log.info(`${why}: ending streams and masters`);
  await sidecar.stop();
  // The private directory of a parent holds copies of its keys: not left behind.
  if (config.removeDir) await rm(config.dir, { recursive: true, force: true });
  return 0;
}
