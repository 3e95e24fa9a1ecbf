/**
 * `make bench` (transport micro part): what one Node process pays, on its own thread and
 * event loop, to receive N log streams over SSH by three transports, side by side in one run,
 * at two loads. Nothing of the collector runs but the transport and the line splitter, so
 * the differences are the transports' own.
 *
 *   node bench/transport-micro-bench.ts [--streams 8] [--light-mbps 40] [--seconds 4] [--runs 3] [--log-mb 128] [--out FILE.md]
 *
 * One local OpenSSH sshd (test-support/src/sshd.ts) serves every stream. The remote
 * command reads a PostgreSQL stderr log generated once into the server's directory
 * (bench/ingest/statements.ts: pgbench-like entries, about 150 bytes a line): at the
 * `saturated` level `cat` in a loop, as fast as the transport takes it; at the `light` level
 * a bash loop that sends --light-mbps / N MB/s per stream in one dd block every 100 ms,
 * paced against the clock. The transports, every one with aes128-gcm@openssh.com:
 * - ssh2: the collector's SshConnection (ssh2 with its native crypto binding) in the measured
 *   process, one connection per stream;
 * - ssh spawned: the measured process spawns one OpenSSH `ssh` per stream (child_process.spawn),
 *   stdout a pipe it reads;
 * - FIFO: a separate shell (started by the measured process, as the collector starts its
 *   sshproxy sidecar) runs one `ssh` per stream with stdout redirected into a FIFO, which the
 *   measured process reads with openFifoReader (collector/src/transport/fifo-reader.ts).
 * Every chunk goes through one LineSplitter per stream (collector/src/logformat/line-splitter.ts).
 *
 * Each transport and level runs in a child process of its own (this file with --child, as
 * bench/ssh-bench.ts does): its heap and JIT are its own. The child starts the streams, waits
 * until every stream has delivered data plus a warm-up, then measures a window of --seconds:
 * bytes split, its own CPU (process.cpuUsage: every thread of the process, not its children),
 * the CPU of the ssh clients / sidecar shell under it (/proc, bench/transport/proc-cpu.ts),
 * the whole machine's busy CPU, and the event-loop delay (perf_hooks.monitorEventLoopDelay,
 * 1 ms resolution; reported RAW, i.e. including the 1 ms sampling interval, as the issue's
 * numbers are). The parent interleaves the configurations run by run and reports medians.
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { chmodSync, closeSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync, writeSync } from 'node:fs';
import { cpus, release, tmpdir } from 'node:os';
import { join } from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import type { Readable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';

import { emitReport } from './lib/emit-report.ts';
import { opensshArgs } from './lib/openssh-args.ts';

const TRANSPORTS = ['ssh2', 'ssh-spawn', 'fifo'] as const;
type Transport = (typeof TRANSPORTS)[number];
const LABEL: Record<Transport, string> = { ssh2: 'ssh2 in-process', 'ssh-spawn': 'ssh spawned (pipe)', fifo: 'ssh in sidecar shell → FIFO' };
const LEVELS = ['saturated', 'light'] as const;
type Level = (typeof LEVELS)[number];
const CIPHER = 'aes128-gcm@openssh.com';
const RESOLUTION_MS = 1;
const WARMUP_MS = 1000;
const TICK_MS = 100;
const FIRST_DATA_TIMEOUT_MS = 30_000;

const { values } = parseArgs({
  options: {
    streams: { type: 'string', default: '8' },
    'light-mbps': { type: 'string', default: '40' },
    seconds: { type: 'string', default: '4' },
    runs: { type: 'string', default: '3' },
    'log-mb': { type: 'string', default: '128' },
    out: { type: 'string' },
    child: { type: 'string' },
  },
});

/** Everything a child needs, passed as one JSON argument. */
interface ChildConfig {
  transport: Transport;
  level: Level;
  streams: number;
  seconds: number;
  lightMBps: number;
  host: string;
  port: number;
  user: string;
  key: string;
  knownHosts: string;
  dir: string;
}
interface ChildResult {
  bytes: number;
  lines: number;
  seconds: number;
  nodeCpu: number;
  childCpu: number;
  machineBusy: number;
  delay: { p50: number; p99: number; max: number; count: number };
  binding: boolean;
}

/** The remote side: `stream.sh FILE BYTES_PER_SECOND` (0: cat in a loop, as fast as read). */
const REMOTE_SCRIPT = `#!/bin/bash
file=$1; rate=$2
if [ "$rate" = 0 ]; then while :; do cat "$file" || exit 1; done; fi
tick=${TICK_MS * 1000}; per=$(( rate * tick / 1000000 )); size=$(stat -c %s "$file")
exec 3<"$file"; off=0; k=0; t0=\${EPOCHREALTIME/./}
while :; do
  if (( off + per > size )); then exec 3<"$file"; off=0; fi
  dd bs=$per count=1 status=none <&3 || exit 1
  off=$(( off + per )); k=$(( k + 1 ))
  wait=$(( t0 + k * tick - \${EPOCHREALTIME/./} ))
  if (( wait > 0 )); then sleep "$(( wait / 1000000 )).$(printf %06d $(( wait % 1000000 )))"; fi
done
`;

function remoteCommand(c: ChildConfig): string {
  const perStream = c.level === 'light' ? Math.round((c.lightMBps * 1e6) / c.streams) : 0;
  return `exec bash ${c.dir}/stream.sh ${c.dir}/postgresql.log ${perStream}`;
}

function sshArgs(c: ChildConfig): string[] {
  return opensshArgs({ host: c.host, port: c.port, user: c.user, privateKeyFile: c.key, knownHostsFile: c.knownHosts }, CIPHER, remoteCommand(c));
}

/** CPU seconds of this process's own threads. */
function ownCpu(): number {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1e6;
}

async function childMain(c: ChildConfig): Promise<ChildResult> {
  const { LineSplitter } = await import('@pglog/collector/logformat/line-splitter.ts');
  const { treeCpuSeconds } = await import('./transport/proc-cpu.ts');
  const { CLK_TCK } = await import('./ingest/proc-stats.ts');
  /** Busy CPU seconds of the whole machine without niced work (other jobs may run niced here). */
  const machineBusy = (): number => {
    const [user = 0, , system = 0, , , irq = 0, softirq = 0, steal = 0] = readFileSync('/proc/stat', 'utf8')
      .split('\n')[0]!
      .trim()
      .split(/\s+/)
      .slice(1)
      .map(Number);
    return (user + system + irq + softirq + steal) / CLK_TCK;
  };
  const { cryptoBindingAvailable } = await import('@pglog/collector/transport/ssh-algorithms.ts');
  let lines = 0;
  const splitters = Array.from(
    { length: c.streams },
    () =>
      new LineSplitter(() => {
        lines++;
      }),
  );
  const splitBytes = (): number => splitters.reduce((sum, s) => sum + s.bytes, 0);
  const delay = monitorEventLoopDelay({ resolution: RESOLUTION_MS });
  delay.enable();

  /** Feeds `stream` into splitter `i`; resolves on its first chunk. */
  const attach = (stream: Readable, i: number): Promise<void> =>
    new Promise((resolve, reject) => {
      const splitter = splitters[i]!;
      stream.on('data', (chunk: Buffer) => {
        splitter.push(chunk);
        resolve();
      });
      stream.once('error', reject);
      stream.once('end', () => reject(new Error(`stream ${i} ended before its first data`)));
    });
  const children: ChildProcess[] = [];
  let stop: () => Promise<void>;
  let first: Promise<void>[];
  if (c.transport === 'ssh2') {
    const { SshConnection } = await import('@pglog/collector/transport/ssh-connection.ts');
    const { ConnectLimiter } = await import('@pglog/collector/transport/connect-limiter.ts');
    const limiter = new ConnectLimiter({ spreadMs: 0 });
    const connections = Array.from(
      { length: c.streams },
      (_, i) =>
        new SshConnection({
          target: `s${i}`,
          host: c.host,
          port: c.port,
          username: c.user,
          privateKey: readFileSync(c.key),
          knownHosts: { text: readFileSync(c.knownHosts, 'utf8'), source: c.knownHosts },
          limiter,
          ciphers: [CIPHER],
        }),
    );
    const procs = await Promise.all(connections.map((conn) => conn.spawn(remoteCommand(c))));
    first = procs.map((p, i) => {
      p.stderr.resume();
      return attach(p.stdout, i);
    });
    stop = async (): Promise<void> => {
      await Promise.all(connections.map((conn) => conn.close()));
    };
  } else if (c.transport === 'ssh-spawn') {
    first = splitters.map((_, i) => {
      const child = spawn('ssh', sshArgs(c), { stdio: ['ignore', 'pipe', 'inherit'] });
      children.push(child);
      return attach(child.stdout, i);
    });
    stop = (): Promise<void> => {
      for (const child of children) child.kill('SIGKILL');
      return Promise.resolve();
    };
  } else {
    const { openFifoReader, closeFifoReader } = await import('@pglog/collector/transport/fifo-reader.ts');
    const fifoDir = mkdtempSync(join(tmpdir(), 'pglog-micro-fifo-'));
    const paths = splitters.map((_, i) => join(fifoDir, `s${i}.out`));
    const made = spawnSync('mkfifo', ['-m', '0600', ...paths], { encoding: 'utf8' });
    if (made.status !== 0) throw new Error(`mkfifo failed: ${made.stderr}`);
    const readers = paths.map((path) => openFifoReader(path));
    first = readers.map((reader, i) => attach(reader, i));
    // The sidecar: one shell, one ssh per stream writing into its FIFO; "$@" is ssh's arguments.
    const script = `${paths.map((p) => `ssh "$@" > ${p} &`).join('\n')}\nwait\n`;
    const sidecar = spawn('/bin/sh', ['-c', script, 'sidecar', ...sshArgs(c)], { stdio: ['ignore', 'ignore', 'inherit'] });
    children.push(sidecar);
    stop = async (): Promise<void> => {
      const { killTree } = await import('@pglog/test-support/process-tree.ts');
      if (sidecar.pid !== undefined) killTree(sidecar.pid);
      for (const reader of readers) closeFifoReader(reader);
      rmSync(fifoDir, { recursive: true, force: true });
    };
  }
  const childCpu = (): number => children.reduce((sum, ch) => sum + (ch.pid === undefined ? 0 : treeCpuSeconds(ch.pid)), 0);
  try {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`not every stream delivered data within ${FIRST_DATA_TIMEOUT_MS} ms`)), FIRST_DATA_TIMEOUT_MS);
    });
    try {
      await Promise.race([Promise.all(first), timeout]);
    } finally {
      clearTimeout(timer);
    }
    await sleep(WARMUP_MS);
    const b0 = splitBytes();
    const l0 = lines;
    const n0 = ownCpu();
    const c0 = childCpu();
    const m0 = machineBusy();
    const t0 = performance.now();
    delay.reset();
    await sleep(c.seconds * 1000);
    const seconds = (performance.now() - t0) / 1000;
    const ms = (ns: number): number => ns / 1e6;
    const result: ChildResult = {
      bytes: splitBytes() - b0,
      lines: lines - l0,
      seconds,
      nodeCpu: ownCpu() - n0,
      childCpu: childCpu() - c0,
      machineBusy: machineBusy() - m0,
      delay: { p50: ms(delay.percentile(50)), p99: ms(delay.percentile(99)), max: ms(delay.max), count: delay.count },
      binding: cryptoBindingAvailable(),
    };
    delay.disable();
    return result;
  } finally {
    await stop();
  }
}

/** Writes about `mb` MB of PostgreSQL stderr log lines to `file`. */
async function writeLog(file: string, mb: number): Promise<number> {
  const { StatementLog, formatLogTime } = await import('@pglog/test-support/statement-log.ts');
  const log = new StatementLog(42);
  const fd = openSync(file, 'w', 0o644);
  let written = 0;
  try {
    for (let ms = Date.parse('2026-11-23T07:00:00Z'); written < mb * 1e6; ms += 1000) {
      written += writeSync(fd, log.entriesBytes(formatLogTime(ms), 1 << 20));
    }
  } finally {
    closeSync(fd);
  }
  return written / log.lines;
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? NaN;

async function parentMain(): Promise<void> {
  const { startSshServer } = await import('@pglog/test-support/sshd.ts');
  const streams = Number(values.streams);
  const seconds = Number(values.seconds);
  const lightMBps = Number(values['light-mbps']);
  const runs = Math.max(1, Number(values.runs));
  const server = await startSshServer();
  const results = new Map<string, ChildResult[]>();
  const key = (t: Transport, l: Level): string => `${t} ${l}`;
  let lineBytes: number;
  try {
    lineBytes = await writeLog(join(server.dir, 'postgresql.log'), Number(values['log-mb']));
    writeFileSync(join(server.dir, 'stream.sh'), REMOTE_SCRIPT);
    chmodSync(join(server.dir, 'stream.sh'), 0o755);
    const self = process.argv[1] ?? new URL(import.meta.url).pathname;
    for (let run = 0; run < runs; run++) {
      for (const level of LEVELS) {
        for (const transport of TRANSPORTS) {
          const config: ChildConfig = {
            transport,
            level,
            streams,
            seconds,
            lightMBps,
            host: server.host,
            port: server.port,
            user: server.user,
            key: server.privateKeyFile,
            knownHosts: server.knownHostsFile,
            dir: server.dir,
          };
          const r = spawnSync(process.execPath, [self, '--child', JSON.stringify(config)], { encoding: 'utf8', maxBuffer: 1 << 20, timeout: 120_000 });
          if (r.status !== 0) throw new Error(`child ${transport} ${level} failed (${r.status ?? r.signal}): ${r.stderr}`);
          const res = JSON.parse(r.stdout) as ChildResult;
          if (!res.binding) throw new Error('ssh2 native crypto binding not available: build it (npm rebuild ssh2) before benchmarking');
          results.set(key(transport, level), [...(results.get(key(transport, level)) ?? []), res]);
          process.stderr.write(
            `run ${run + 1} ${level.padEnd(9)} ${LABEL[transport].padEnd(28)} ${(res.bytes / res.seconds / 1e6).toFixed(1).padStart(7)} MB/s  ` +
              `node ${(res.nodeCpu / (res.bytes / 1e9)).toFixed(2)} s/GB  children ${(res.childCpu / (res.bytes / 1e9)).toFixed(2)} s/GB  ` +
              `loop p50/p99/max ${res.delay.p50.toFixed(2)}/${res.delay.p99.toFixed(2)}/${res.delay.max.toFixed(1)} ms\n`,
          );
        }
      }
    }
  } finally {
    await server.dispose();
  }
  const pick = (t: Transport, l: Level, get: (r: ChildResult) => number): number => median((results.get(key(t, l)) ?? []).map(get));
  const mbps = (r: ChildResult): number => r.bytes / r.seconds / 1e6;
  const nodePerGB = (r: ChildResult): number => r.nodeCpu / (r.bytes / 1e9);
  const childPerGB = (r: ChildResult): number => r.childCpu / (r.bytes / 1e9);
  const busy = (r: ChildResult): number => (100 * r.machineBusy) / r.seconds / cpus().length;
  const p50 = (r: ChildResult): number => r.delay.p50;
  const p99 = (r: ChildResult): number => r.delay.p99;
  const max = (r: ChildResult): number => r.delay.max;
  const row = (t: Transport, l: Level): string => {
    const f = (get: (r: ChildResult) => number, digits: number): string => pick(t, l, get).toFixed(digits);
    return `| ${LABEL[t]} | ${l} | ${f(mbps, 1)} | ${f(nodePerGB, 2)} | ${t === 'ssh2' ? '—' : f(childPerGB, 2)} | ${f(p50, 2)} / ${f(p99, 2)} / ${f(max, 1)} | ${f(busy, 0)} % |`;
  };
  const ratio = (a: Transport, b: Transport, l: Level, get: (r: ChildResult) => number): number => pick(a, l, get) / pick(b, l, get);
  const x = (v: number): string => `${v.toFixed(2)}×`;
  const ratioRow = (a: Transport, b: Transport, l: Level): string =>
    `| ${LABEL[a]} / ${LABEL[b]} | ${l} | ${x(ratio(a, b, l, mbps))} | ${x(ratio(a, b, l, nodePerGB))} | ${x(ratio(a, b, l, p50))} | ${x(ratio(a, b, l, p99))} | ${x(ratio(a, b, l, max))} |`;
  const s = (t: Transport, l: Level, get: (r: ChildResult) => number, digits = 2): string => pick(t, l, get).toFixed(digits);
  const cpuVsSsh = pick('ssh2', 'saturated', nodePerGB) / pick('ssh-spawn', 'saturated', childPerGB);
  const gapSat = ratio('ssh2', 'fifo', 'saturated', p50);
  const text = [
    `## Transport micro-benchmark: ${streams} streams into one Node process (bench/transport-micro-bench.ts)`,
    '',
    `${streams} streams of a generated PostgreSQL stderr log (${lineBytes.toFixed(0)} bytes a line on average) from one local OpenSSH sshd, ${CIPHER}, ` +
      `each split into lines by the collector's LineSplitter and nothing else, in a Node process of its own per transport and level. ` +
      `saturated: remote \`cat\` in a loop on every stream; light: ${lightMBps} MB/s in total, paced remotely in ${TICK_MS} ms ticks. ` +
      `Window of ${seconds} s after every stream delivered data plus ${WARMUP_MS / 1000} s; ${runs === 1 ? 'one run' : `median of ${runs} runs`}, configurations interleaved. ` +
      `Node CPU: the measured process (all its threads, not its children) per GB split; ssh / sidecar CPU: the ssh clients it spawned, or the sidecar shell and its ssh clients, per GB. ` +
      `Loop delay: monitorEventLoopDelay with a ${RESOLUTION_MS} ms timer, raw (the 1 ms interval included, so an idle loop reads about 1.0–1.1 ms), in ms. ` +
      `machine busy: all cores, everything but niced work (measured process, ssh clients, sshd and the remote commands; other jobs ran niced on this machine meanwhile). MB = 10^6 bytes, GB = 10^9. ` +
      `${cpus().length} × ${cpus()[0]?.model ?? 'unknown'}, Linux ${release()}, Node ${process.version}, ${spawnSync('ssh', ['-V'], { encoding: 'utf8' }).stderr.trim()}; ` +
      `measured ${new Date().toISOString().slice(0, 10)}.`,
    '',
    '| transport | level | MB/s | Node CPU s/GB | ssh / sidecar CPU s/GB | loop delay p50 / p99 / max (ms) | machine busy |',
    '|---|---|---:|---:|---:|---:|---:|',
    ...LEVELS.flatMap((l) => TRANSPORTS.map((t) => row(t, l))),
    '',
    '| ratio | level | MB/s | Node CPU / GB | loop p50 | loop p99 | loop max |',
    '|---|---|---:|---:|---:|---:|---:|',
    ...LEVELS.flatMap((l) => [ratioRow('ssh2', 'fifo', l), ratioRow('ssh2', 'ssh-spawn', l), ratioRow('ssh-spawn', 'fifo', l)]),
    '',
    `On this machine (${cpus().length} cores) the measured process shares the cores with the ${streams} ssh clients (spawned, FIFO), the ${streams} sshd session processes and the remote commands. ` +
      `"saturated" is every stream at full speed: the machine was then ${TRANSPORTS.map((t) => `${s(t, 'saturated', busy, 0)} %`).join(' / ')} busy (ssh2 / spawned / FIFO, niced work of other jobs not counted), ` +
      'and each transport reaches its own throughput, so compare CPU per GB rather than MB/s; the ssh2 process also does the decryption that the other two leave to ssh. ' +
      'A likely reason for the ssh2 loop delay at full speed (not measured here): a TCP socket with a deep receive queue gives libuv many 64 KiB reads per socket in one poll iteration, ' +
      'each decrypted on the loop thread, while a pipe never holds more than its 64 KiB buffer.',
    '',
    `The issue's seed result (another machine): one ssh2 stream costs the Node thread about 1.9× the CPU per GB of a spawned \`ssh\` child; with ${streams} saturated streams the loop delay p50 is ` +
      `21 ms for ssh2, 3.8 ms for spawned ssh and 1.2 ms for the FIFO; at 40 MB/s about 1.9 ms p99 for every transport. ` +
      `Here: ssh2's Node CPU per GB is ${cpuVsSsh.toFixed(2)}× the spawned ssh clients' CPU per GB (${s('ssh2', 'saturated', nodePerGB)} vs ${s('ssh-spawn', 'saturated', childPerGB)} s/GB) ` +
      `and ${x(ratio('ssh2', 'fifo', 'saturated', nodePerGB))} the FIFO reader's Node CPU per GB (Node + ssh clients per GB: ssh2 ${s('ssh2', 'saturated', nodePerGB)}, ` +
      `spawned ${s('ssh-spawn', 'saturated', (r) => nodePerGB(r) + childPerGB(r))}, FIFO ${s('fifo', 'saturated', (r) => nodePerGB(r) + childPerGB(r))} s/GB); saturated loop delay p50 ${s('ssh2', 'saturated', p50)} / ${s('ssh-spawn', 'saturated', p50)} / ${s('fifo', 'saturated', p50)} ms ` +
      `(ssh2 / spawned / FIFO, ssh2 ${x(gapSat)} the FIFO), p99 ${s('ssh2', 'saturated', p99)} / ${s('ssh-spawn', 'saturated', p99)} / ${s('fifo', 'saturated', p99)} ms; ` +
      `light p99 ${s('ssh2', 'light', p99)} / ${s('ssh-spawn', 'light', p99)} / ${s('fifo', 'light', p99)} ms. ` +
      `${gapSat >= 3 ? 'The loop-delay gap at saturation reproduces' : 'The loop-delay gap at saturation does not reproduce'} (ssh2 p50 ${x(gapSat)} the FIFO's; spawned ssh ` +
      `${x(ratio('ssh-spawn', 'fifo', 'saturated', p50))} the FIFO's, where the seed had 3.2×); ` +
      `${ratio('ssh2', 'fifo', 'light', p99) < 1.5 ? 'at light load all three stay close, as in the seed' : 'at light load ssh2 is also behind, unlike the seed'}; ` +
      `${cpuVsSsh >= 1.5 ? 'the CPU-per-GB ratio reproduces' : `the 1.9× CPU-per-GB ratio does not reproduce (${cpuVsSsh.toFixed(2)}× here, measured with ${streams} streams, not the seed's one)`}.`,
    '',
  ].join('\n');
  emitReport(text, values.out);
}

if (values.child !== undefined) {
  const result = await childMain(JSON.parse(values.child) as ChildConfig);
  process.stdout.write(JSON.stringify(result) + '\n');
  process.exit(0); // whatever the streams' teardown left behind must not keep the child alive
} else {
  await parentMain();
}
