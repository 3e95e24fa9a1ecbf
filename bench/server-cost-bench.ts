/**
 * `make bench` (server cost): what following a log costs the monitored server, with the
 * polling loop (before) and the builtin wait (after, ADR 0014) side by side in one run, idle
 * and at a fixed append rate: process starts a second and CPU per followed log (its remote
 * loop, and sshd), and how soon a line written after a silence is delivered; under load also
 * the builtin wait reading again 400 ms after data (ADR 0023, before ADR 0025) against its default.
 *
 *   node bench/server-cost-bench.ts [--streams 4] [--rate-mb 1] [--window 20] [--latency-rounds 3] [--out FILE.md]
 *
 * One local OpenSSH sshd (test-support/src/sshd.ts) and one ssh2 connection from this
 * process, the collector's LogFollower with its production intervals; the logs are appended
 * to by this process. Phases run one at a time, each on fresh logs (bench/server-cost/phase.ts).
 */
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';

import { defaultDataInterval, FOLLOW_DEFAULTS } from '@pglog/collector/follow/follower.ts';
import type { IdleWait } from '@pglog/collector/follow/segment-script.ts';
import { SshConnection } from '@pglog/collector/transport/ssh-connection.ts';
import { sshConnectionOptions } from '@pglog/test-support/ssh-connection.ts';
import { startSshServer } from '@pglog/test-support/sshd.ts';

import { createCleanup } from './lib/cleanup.ts';
import { emitReport } from './lib/emit-report.ts';
import { type PhaseResult, runPhase } from './server-cost/phase.ts';

const { values } = parseArgs({
  options: {
    streams: { type: 'string', default: '4' },
    'rate-mb': { type: 'string', default: '1' },
    window: { type: 'string', default: '20' },
    'latency-rounds': { type: 'string', default: '3' },
    out: { type: 'string' },
  },
});
const streams = Number(values.streams);
const rate = Number(values['rate-mb']) * 1e6;
const windowS = Number(values.window);
const latencyRounds = Number(values['latency-rounds']);
/** The wait after a round with data of ADR 0023, before ADR 0025 doubled it. */
const BEFORE_DATA_INTERVAL_MS = 400;
const { pollIntervalMs, idleMs, rotationCheckMs, heartbeatMs } = FOLLOW_DEFAULTS;
const dataIntervalMs = defaultDataInterval(pollIntervalMs, idleMs);
const say = (line: string): void => {
  process.stderr.write(`server-cost-bench: ${line}\n`);
};
const cleanup = createCleanup(say);
const started = Date.now();

const results: PhaseResult[] = [];
try {
  const server = await startSshServer({ maxSessions: 4 * streams + 4 });
  cleanup.push(() => server.dispose());
  const connection = new SshConnection(sshConnectionOptions(server, { target: 'bench' }));
  cleanup.push(() => connection.close());
  const root = mkdtempSync(join(tmpdir(), 'pglog-server-cost-'));
  chmodSync(root, 0o755);
  cleanup.push(() => rmSync(root, { recursive: true, force: true }));
  let n = 0;
  // A B B A: drift in what else the machine does weighs on both alike. Under load, the builtin
  // loop also with the 400 ms wait after data it had before ADR 0025.
  const phases: Array<{ load: number; idleWait: IdleWait; dataIntervalMs?: number }> = [
    ...(['polling', 'builtins', 'builtins', 'polling'] as const).map((idleWait) => ({ load: 0, idleWait })),
    ...(['polling', 'builtins', 'builtins', 'polling'] as const).map((idleWait) => ({ load: rate, idleWait })),
    ...[BEFORE_DATA_INTERVAL_MS, undefined, undefined, BEFORE_DATA_INTERVAL_MS].map((dataIntervalMs) => ({
      load: rate,
      idleWait: 'builtins' as const,
      dataIntervalMs,
    })),
  ];
  for (const { load, idleWait, dataIntervalMs } of phases) {
    say(`${idleWait}${dataIntervalMs === undefined ? '' : `, ${dataIntervalMs} ms after data`}, ${load === 0 ? 'idle' : `${load / 1e6} MB/s`} ...`);
    const r = await runPhase({
      shell: connection,
      dir: join(root, `p${++n}`),
      idleWait,
      ...(dataIntervalMs === undefined ? {} : { dataIntervalMs }),
      streams,
      rate: load,
      windowS,
      latencyRounds,
      gapMs: 5_000,
    });
    say(
      `  ${r.startsPerS.toFixed(2)} starts/s, loop ${r.loopCpuMsPerS.toFixed(2)} ms/s, sshd ${r.sshdCpuMsPerS.toFixed(2)} ms/s, ${(r.deliveredBytesPerS / 1e6).toFixed(3)} MB/s per stream`,
    );
    results.push(r);
  }
} finally {
  await cleanup.run();
}

/** The mean of a mode's sessions at a load (latencies: all samples); `dataIntervalMs` null: the follower's default. */
const find = (idleWait: IdleWait, load: number, dataIntervalMs: number | null = null): PhaseResult => {
  const rs = results.filter((x) => x.idleWait === idleWait && x.rate === load && x.dataIntervalMs === dataIntervalMs);
  if (rs.length === 0) throw new Error(`no result for ${idleWait} at ${load}`);
  const mean = (f: (r: PhaseResult) => number): number => rs.reduce((a, r) => a + f(r), 0) / rs.length;
  return {
    idleWait,
    dataIntervalMs,
    rate: load,
    streams,
    loopCpuMsPerS: mean((r) => r.loopCpuMsPerS),
    sshdCpuMsPerS: mean((r) => r.sshdCpuMsPerS),
    startsPerS: mean((r) => r.startsPerS),
    deliveredBytesPerS: mean((r) => r.deliveredBytesPerS),
    latenciesMs: rs.flatMap((r) => r.latenciesMs),
  };
};
const fixed = (x: number, d = 2): string => x.toFixed(d);
const ratio = (before: number, after: number): string => (after === 0 ? (before === 0 ? '1' : '∞') : `${(before / after).toFixed(1)}×`);
const pct = (xs: number[], p: number): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(p * s.length))] ?? NaN;
};
const row = (label: string, load: number, b = find('polling', load), a = find('builtins', load)): string[] => {
  return [
    `| ${label} | process starts / s | ${fixed(b.startsPerS)} | ${fixed(a.startsPerS)} | ${ratio(b.startsPerS, a.startsPerS)} |`,
    `| ${label} | remote loop CPU, ms / s | ${fixed(b.loopCpuMsPerS)} | ${fixed(a.loopCpuMsPerS)} | ${ratio(b.loopCpuMsPerS, a.loopCpuMsPerS)} |`,
    `| ${label} | sshd CPU, ms / s | ${fixed(b.sshdCpuMsPerS)} | ${fixed(a.sshdCpuMsPerS)} | ${ratio(b.sshdCpuMsPerS, a.sshdCpuMsPerS)} |`,
    `| ${label} | delivered, MB / s | ${fixed(b.deliveredBytesPerS / 1e6, 3)} | ${fixed(a.deliveredBytesPerS / 1e6, 3)} | |`,
  ];
};
const lb = find('polling', 0).latenciesMs;
const la = find('builtins', 0).latenciesMs;
const minutes = ((Date.now() - started) / 60_000).toFixed(1);
const text = [
  '## Server cost of a followed log',
  '',
  `\`node bench/server-cost-bench.ts\` (in \`make bench\`): ${streams} logs followed at once by the collector's LogFollower (production intervals: ${pollIntervalMs} ms poll, ${dataIntervalMs} ms wait after a round with data, rotation check every ${rotationCheckMs / 1000} s, heartbeat every ${heartbeatMs / 1000} s) over one ssh2 connection to one local OpenSSH sshd, ` +
    `each log with a \`current_logfiles\` naming it, as PostgreSQL's logging collector writes; first all idle, then each appended to at ${fixed(rate / 1e6, 1)} MB/s (whole ~150-byte lines every 10 ms). ` +
    `**Before**: the polling loop (\`idleWait: 'polling'\`, a few processes every poll); **after**: the builtin wait (the default, ADR 0014). Two sessions of each per load, in the order before, after, after, before (figures: their mean), each on fresh logs, measured after 4 s: ` +
    `over ${windowS} s, CPU (each loop's shell with everything it started, /proc utime+stime+cutime+cstime; sshd's processes) and process starts (\`perf stat\` of the task:task_newtask tracepoint on each loop, inherited by its children: every fork, counted in the kernel without slowing the loop). ` +
    `Per followed log. Latency: in the idle phases, a line appended to every log after ${windowS + 4} s of silence, then ${latencyRounds - 1} more after 5 s silences, timed until delivered. ` +
    `${cpus().length} CPUs (${cpus()[0]?.model ?? 'unknown'}), Node ${process.version}; everything on this machine. Measured ${new Date().toISOString().slice(0, 10)}, ${minutes} min. MB = 10^6 bytes.`,
  '',
  '| load | per followed log | before (polling) | after (builtins) | before / after |',
  '|---|---|---:|---:|---:|',
  ...row('idle', 0),
  ...row(`${fixed(rate / 1e6, 1)} MB/s`, rate),
  `| idle | line after silence delivered, ms: median / max of ${lb.length} | ${fixed(pct(lb, 0.5), 0)} / ${fixed(Math.max(...lb), 0)} | ${fixed(pct(la, 0.5), 0)} / ${fixed(Math.max(...la), 0)} | |`,
  '',
  `The builtin wait under load, reading again ${BEFORE_DATA_INTERVAL_MS} ms after a round with data (ADR 0023, before ADR 0025) against the follower's default wait after data (${dataIntervalMs} ms, ADR 0025), two sessions of each in the order before, after, after, before:`,
  '',
  `| load | per followed log | before (${BEFORE_DATA_INTERVAL_MS} ms after data) | after (the default) | before / after |`,
  '|---|---|---:|---:|---:|',
  ...row(`${fixed(rate / 1e6, 1)} MB/s`, rate, find('builtins', rate, BEFORE_DATA_INTERVAL_MS), find('builtins', rate)),
  '',
].join('\n');
emitReport(text, values.out);
