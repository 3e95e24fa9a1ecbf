/**
 * Cluster mode, pure: the command line and environment of the collector child the launcher
 * starts with a shard's Node.js tuning (docs/operator.md "Node.js tuning": heap sizes and growing factor are V8 flags and
 * the libuv threadpool size an environment variable, all fixed at process start).
 */
import type { ShardTuning } from '@pglog/common/api/collector-shard.ts';

import { formatTuning } from './tuning.ts';

/**
 * The V8 flags a tuning sets, as the child's command line carries them. The growing factor only
 * when the tuning has one (a shard from an older operator keeps the launcher's).
 */
export function tuningNodeFlags(tuning: ShardTuning): string[] {
  const flags = [`--max-old-space-size=${tuning.maxOldSpaceSizeMiB}`, `--max-semi-space-size=${tuning.maxSemiSpaceSizeMiB}`];
  if (tuning.heapGrowingPercent !== undefined) flags.push(`--heap-growing-percent=${tuning.heapGrowingPercent}`);
  return flags;
}

export interface LaunchCommand {
  command: string;
  args: string[];
  env: Record<string, string | undefined>;
}

/**
 * `selfCommand` is how this program runs ([node, ...node flags, main script]); `collectArgs`
 * the launcher's own `collect` arguments, passed on unchanged but for `--launched`.
 */
export function launchCommand(
  selfCommand: readonly string[],
  collectArgs: readonly string[],
  tuning: ShardTuning,
  env: Readonly<Record<string, string | undefined>>,
): LaunchCommand {
  const [node, ...rest] = selfCommand;
  if (node === undefined || rest.length === 0) throw new Error('launchCommand: selfCommand needs the node binary and the main script');
  const script = rest[rest.length - 1]!;
  const tuned = tuningNodeFlags(tuning);
  // Any of these the launcher itself was started with are replaced.
  const launcherFlags = withoutFlags(
    rest.slice(0, -1),
    tuned.map((flag) => flag.split('=')[0]!),
  );
  return {
    command: node,
    args: [...launcherFlags, ...tuned, script, 'collect', ...withoutFlags(collectArgs, ['--launched']), '--launched', formatTuning(tuning)],
    env: { ...env, UV_THREADPOOL_SIZE: String(tuning.uvThreadpoolSize) },
  };
}

/** `args` without each of `flags`, in both `--flag=value` and `--flag value` forms. */
function withoutFlags(args: readonly string[], flags: readonly string[]): string[] {
  const out: string[] = [];
  for (let k = 0; k < args.length; k++) {
    const a = args[k]!;
    // Node accepts `_` for `-` in V8 flag names.
    const name = a.split('=')[0]!.replace(/_/g, '-');
    if (!flags.includes(name)) {
      out.push(a);
      continue;
    }
    if (!a.includes('=')) k++; // its value is the next argument
  }
  return out;
}

/** The exit status a shell would report for a child: its code, or 128 + the signal's number. */
export function exitStatusOf(code: number | null, signal: NodeJS.Signals | null, signalNumbers: Readonly<Record<string, number>>): number {
  if (code !== null) return code;
  if (signal !== null) return 128 + (signalNumbers[signal] ?? 0);
  return 1;
}
