/**
 * `make bench` (spawn part): how long `child_process.spawn()` holds the event loop in a
 * process with a large live heap (a collector) against a small fresh process (the sshproxy
 * sidecar), side by side in one run. This is why the sidecar, not the collector, starts the
 * `ssh` clients (docs/sshproxy.md, docs/decisions/0007-transport-promotion.md).
 *
 *   node bench/spawn-bench.ts [--heap-mb 1024] [--spawns 200] [--out FILE.md]
 *
 * Each variant runs in its own child process (this file with --role child):
 * - "small": a fresh Node process with the default heap, like the sidecar;
 * - "large": a Node process (--max-old-space-size big enough) that first builds and keeps
 *   --heap-mb MiB of live small objects (plain objects each holding a two-element array, in
 *   chunks of arrays), so V8's heap really is that big and spread over many pages.
 * Both run gc() (--expose-gc) before measuring, so no collection of the set-up's garbage falls
 * into the measurement. Then, for `/bin/true` and for `ssh -V`, a few warm-up spawns and
 * --spawns measured ones, one at a time (each awaited to its exit): the time the spawn() call
 * takes to return (on Linux, libuv forks and waits until the child has exec'd, all on the event
 * loop's thread), and the event loop's delay meanwhile (perf_hooks.monitorEventLoopDelay, 1 ms
 * sampling timer, the delay beyond it).
 */
import { spawn, spawnSync } from 'node:child_process';
import { cpus, release } from 'node:os';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { getHeapStatistics } from 'node:v8';

import { emitReport } from './lib/emit-report.ts';

const RESOLUTION_MS = 1;
const WARMUP_SPAWNS = 5;
const COMMANDS = [['/bin/true'], ['ssh', '-V']] as const;

const { values } = parseArgs({
  options: {
    'heap-mb': { type: 'string', default: '1024' },
    spawns: { type: 'string', default: '200' },
    out: { type: 'string' },
    role: { type: 'string' },
    keep: { type: 'string' },
  },
});

interface Percentiles {
  p50: number;
  p99: number;
  max: number;
}
interface CommandResult {
  command: string;
  spawnMs: Percentiles;
  delayP99: number;
  delayMax: number;
  wallMs: number;
}
interface ChildResult {
  heapMB: number;
  rssMB: number;
  buildSeconds: number;
  commands: CommandResult[];
}

if (values.role === 'child') {
  process.stdout.write(JSON.stringify(await childMain()) + '\n');
} else {
  parentMain();
}

function percentiles(samples: number[]): Percentiles {
  const s = [...samples].sort((a, b) => a - b);
  const at = (q: number): number => s[Math.min(s.length - 1, Math.ceil(q * s.length) - 1)] ?? NaN;
  return { p50: at(0.5), p99: at(0.99), max: s[s.length - 1] ?? NaN };
}

/** Keeps --keep MB of live small objects (nothing when 0), then measures spawns. */
async function childMain(): Promise<ChildResult> {
  const keepBytes = Number(values.keep ?? '0') * 1024 * 1024;
  const kept: { id: number; label: number; pair: number[]; next: unknown }[][] = [];
  const t0 = performance.now();
  while (getHeapStatistics().used_heap_size < keepBytes) {
    const chunk = new Array<{ id: number; label: number; pair: number[]; next: unknown }>(100_000);
    for (let i = 0; i < chunk.length; i++) chunk[i] = { id: i, label: i * 7, pair: [i, i + 1], next: i > 0 ? chunk[i - 1] : null };
    kept.push(chunk);
  }
  const buildSeconds = (performance.now() - t0) / 1000;
  const gc = (globalThis as { gc?: () => void }).gc;
  if (gc === undefined) throw new Error('run the child with --expose-gc');
  gc();
  gc();
  const heapMB = getHeapStatistics().used_heap_size / 1024 / 1024;
  const rssMB = process.memoryUsage.rss() / 1024 / 1024;

  const spawns = Number(values.spawns);
  const commands: CommandResult[] = [];
  for (const [command, ...args] of COMMANDS) {
    const once = async (): Promise<number> => {
      const started = performance.now();
      const child = spawn(command, args, { stdio: 'ignore' });
      const ms = performance.now() - started;
      await new Promise<void>((resolve, reject) => {
        child.once('error', reject);
        child.once('exit', (code) => {
          if (code === 0) resolve();
          else reject(new Error(`${command} exited with ${code}`));
        });
      });
      return ms;
    };
    for (let i = 0; i < WARMUP_SPAWNS; i++) await once();
    const delay = monitorEventLoopDelay({ resolution: RESOLUTION_MS });
    delay.enable();
    const wall0 = performance.now();
    const samples: number[] = [];
    for (let i = 0; i < spawns; i++) samples.push(await once());
    const wallMs = performance.now() - wall0;
    delay.disable();
    const ms = (ns: number): number => Math.max(0, ns / 1e6 - RESOLUTION_MS);
    commands.push({
      command: [command, ...args].join(' '),
      spawnMs: percentiles(samples),
      delayP99: ms(delay.percentile(99)),
      delayMax: ms(delay.max),
      wallMs,
    });
  }
  if (kept.length > 0 && kept[kept.length - 1]?.[0]?.id !== 0) throw new Error('unreachable: keeps the heap alive until here');
  return { heapMB, rssMB, buildSeconds, commands };
}

function runChild(nodeArgs: string[], keepMB: number): ChildResult {
  const self = process.argv[1] ?? new URL(import.meta.url).pathname;
  const r = spawnSync(process.execPath, ['--expose-gc', ...nodeArgs, self, '--role', 'child', '--keep', String(keepMB), '--spawns', String(values.spawns)], {
    encoding: 'utf8',
    maxBuffer: 1 << 20,
  });
  if (r.status !== 0) throw new Error(`child (keep ${keepMB} MB) failed: ${r.stderr}`);
  return JSON.parse(r.stdout) as ChildResult;
}

function parentMain(): void {
  const heapMB = Number(values['heap-mb']);
  const variants = [
    { name: 'small fresh process (like the sidecar)', result: runChild([], 0) },
    { name: `${heapMB} MiB live heap (like a collector)`, result: runChild([`--max-old-space-size=${Math.ceil(heapMB * 2.5)}`], heapMB) },
  ];
  for (const v of variants) {
    process.stderr.write(
      `${v.name}: heap ${v.result.heapMB.toFixed(0)} MB, RSS ${v.result.rssMB.toFixed(0)} MB (built in ${v.result.buildSeconds.toFixed(1)} s)\n`,
    );
    for (const c of v.result.commands)
      process.stderr.write(
        `  ${c.command.padEnd(10)} spawn() p50 ${c.spawnMs.p50.toFixed(2)} p99 ${c.spawnMs.p99.toFixed(2)} max ${c.spawnMs.max.toFixed(2)} ms; loop delay max ${c.delayMax.toFixed(2)} ms\n`,
      );
  }
  const [small, large] = variants;
  if (small === undefined || large === undefined) throw new Error('unreachable');
  const fmt = (n: number): string => n.toFixed(2);
  const rows = COMMANDS.flatMap(([command, ...args]) => {
    const name = [command, ...args].join(' ');
    const find = (v: { result: ChildResult }): CommandResult | undefined => v.result.commands.find((c) => c.command === name);
    const s = find(small);
    const l = find(large);
    if (s === undefined || l === undefined) return [];
    const line = (label: string, v: { result: ChildResult }, c: CommandResult): string =>
      `| \`${name}\` | ${label} | ${v.result.heapMB.toFixed(0)} | ${v.result.rssMB.toFixed(0)} | ${fmt(c.spawnMs.p50)} | ${fmt(c.spawnMs.p99)} | ${fmt(c.spawnMs.max)} | ${fmt(c.delayP99)} | ${fmt(c.delayMax)} |`;
    const ratio = (a: number, b: number): string => (b > 0 ? `${(a / b).toFixed(1)}×` : '—');
    return [
      line(small.name, small, s),
      line(large.name, large, l),
      `| \`${name}\` | *large / small* | | | ${ratio(l.spawnMs.p50, s.spawnMs.p50)} | ${ratio(l.spawnMs.p99, s.spawnMs.p99)} | ${ratio(l.spawnMs.max, s.spawnMs.max)} | ${ratio(l.delayP99, s.delayP99)} | ${ratio(l.delayMax, s.delayMax)} |`,
    ];
  });
  const summary = (): string => {
    const ssh = (v: { result: ChildResult }): CommandResult | undefined => v.result.commands.find((c) => c.command === 'ssh -V');
    const s = ssh(small);
    const l = ssh(large);
    if (s === undefined || l === undefined) return '';
    return (
      `libuv starts every child with fork() on Linux, then waits for its exec, all on the calling thread; fork copies the page tables of the whole resident heap, so the time grows with the heap. ` +
      `Here one spawn of \`ssh\` holds the event loop for ${l.spawnMs.p50.toFixed(1)} ms (median) in the ${large.result.heapMB.toFixed(0)} MiB process against ${s.spawnMs.p50.toFixed(1)} ms in the small one ` +
      `(${(l.spawnMs.p50 / s.spawnMs.p50).toFixed(1)}×). This is why the sshproxy sidecar, a small-heap process with nothing else on its event loop, starts and restarts the \`ssh\` clients, and the collector, whose heap holds every stream's buffers, only reads their FIFOs.`
    );
  };
  const sshVersion = spawnSync('ssh', ['-V'], { encoding: 'utf8' }).stderr.trim();
  const text = [
    '## Spawning `ssh`: small process against large heap (bench/spawn-bench.ts)',
    '',
    `The time one \`child_process.spawn()\` call takes to return (the event loop is blocked for all of it: libuv forks, then waits until the child has exec'd), ` +
      `median / p99 / max of ${values.spawns} spawns one at a time after ${WARMUP_SPAWNS} warm-up spawns, and the event loop's delay meanwhile (monitorEventLoopDelay, ${RESOLUTION_MS} ms timer, delay beyond it). ` +
      `Each process is a child of its own; the large one first builds ${heapMB} MiB of live small objects (objects holding two-element arrays) and keeps them; both run gc() before measuring. ` +
      `Heap = V8 used heap, RSS = resident set, both in MiB, when the spawns start. All times in ms. ` +
      `Machine: ${cpus().length} × ${cpus()[0]?.model ?? 'unknown'}, Linux ${release()}, Node ${process.version} (libuv ${process.versions.uv}), ${sshVersion}. Measured ${new Date().toISOString().slice(0, 10)}.`,
    '',
    '| command | process | heap MiB | RSS MiB | spawn() p50 | spawn() p99 | spawn() max | loop delay p99 | loop delay max |',
    '|---|---|---:|---:|---:|---:|---:|---:|---:|',
    ...rows,
    '',
    summary(),
    '',
  ].join('\n');
  emitReport(text, values.out);
}
