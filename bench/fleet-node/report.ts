/**
 * The fleet run's report as markdown (bench/fleet-node.ts --out): what ran, how long each
 * set-up step took, the time from `helm install` until every server streamed, what each
 * collector pod held then, a pod crashed and its servers back, the soak's faults, memory and CPU
 * over the run, and the end-of-run checks. Pure.
 */
import type { StreamingTimes } from '@pglog/test-support/fleet-sim/streaming.ts';

import type { FinalCheck, Holdings, KillResult } from '../../operator/test/helpers/fleet-node/measure.ts';
import type { FaultRecord } from './faults.ts';
import type { Sample } from './samples.ts';

export interface RunReport {
  title: string;
  /** What was asked: servers, real servers, replicas, HPA, soak, seed. */
  settings: Array<[string, string]>;
  steps: Array<{ step: string; seconds: number }>;
  helmSeconds: number;
  streaming: StreamingTimes;
  /** Each real server's seconds from the install until its statements streamed (null: not within the wait). */
  realStreaming: Array<[string, number | null]>;
  atStreaming: Holdings | null;
  kill: KillResult | null;
  faults: FaultRecord[];
  samples: readonly Sample[];
  check: FinalCheck | null;
  restarts: string[];
  oomKills: number;
  problems: Array<{ line: string; count: number; level: number }>;
  /** The operator's target moves and transport changes (its counters), and the collectors' restarts for a new tuning (their logs). */
  activity: { moves: number; promotions: number; demotions: number; tuningRestarts: number };
  files: { csv: string | null; svg: string | null };
  ok: boolean;
}

const MiB = 2 ** 20;
const s1 = (v: number | null | undefined): string => (v === null || v === undefined ? '-' : v.toFixed(1));

function table(head: readonly string[], rows: ReadonlyArray<readonly string[]>): string[] {
  return [`| ${head.join(' | ')} |`, `|${head.map(() => '---').join('|')}|`, ...rows.map((r) => `| ${r.join(' | ')} |`)];
}

function holdingsLines(h: Holdings): string[] {
  return [
    ...table(
      ['pod', 'SSH connections', 'store connections', 'RSS MiB (collector + sidecar)', 'peak MiB (cgroup)'],
      h.pods.map((p) => [
        p.pod,
        String(p.sshConnections),
        String(p.storeConnections),
        p.usage === undefined ? '-' : `${s1(p.usage.rss / MiB)} (${s1(p.usage.collectorRss / MiB)} + ${s1(p.usage.sidecarRss / MiB)})`,
        p.usage === undefined ? '-' : s1(p.usage.peak / MiB),
      ]),
    ),
    '',
    `Store connections in all: ${h.storeTotal}; SSH connections to the fleet from no collector pod: ${h.otherSsh}.`,
  ];
}

/** Per pod over the samples: the largest RSS and the mean CPU. */
function resourceLines(samples: readonly Sample[]): string[] {
  const pods = [...new Set(samples.flatMap((s) => s.pods.map((p) => p.pod)))].sort((a, b) => a.localeCompare(b, 'en', { numeric: true }));
  const rows = pods.map((pod) => {
    const points = samples.flatMap((s) => s.pods.filter((p) => p.pod === pod));
    const rss = points.map((p) => p.rssMiB);
    const cores = points.map((p) => p.cores).filter((c) => c > 0);
    const third = Math.max(1, Math.floor(rss.length / 3));
    const mean = (xs: readonly number[]): number => (xs.length === 0 ? 0 : xs.reduce((a, b) => a + b, 0) / xs.length);
    return [pod, String(points.length), s1(Math.max(0, ...rss)), s1(mean(rss.slice(0, third))), s1(mean(rss.slice(-third))), mean(cores).toFixed(3)];
  });
  const lagMax = Math.max(0, ...samples.map((s) => s.lagMax));
  const lagP95 = Math.max(0, ...samples.map((s) => s.lagP95));
  return [
    ...table(['pod', 'samples', 'RSS max MiB', 'RSS mean, first third', 'RSS mean, last third', 'CPU cores (mean)'], rows),
    '',
    `Lag behind the fleet over the run: p95 at most ${s1(lagP95)} s, max at most ${s1(lagMax)} s (every 10 s, from the install).`,
  ];
}

function checkLines(r: RunReport): string[] {
  const c = r.check;
  const lines = [
    c === null
      ? '- markers: not checked (the run stopped early)'
      : `- markers: ${c.line.split('\n')[0]} (store drained ${s1(c.drainedSeconds)} s after writing stopped)`,
    ...(c?.real ?? []).map((x) => `- ${x.line}`),
    `- handshakes refused by sshd (MaxStartups): ${c?.refusedHandshakes ?? '-'}`,
    `- restarts: ${r.restarts.length === 0 ? 'none' : r.restarts.join('; ')}; OOM kills: ${r.oomKills}`,
    `- the operator moved targets to another shard ${r.activity.moves} times, to the sidecar ${r.activity.promotions} and back ${r.activity.demotions}; collector processes restarted for a new tuning: ${r.activity.tuningRestarts}`,
    `- collector warnings and errors: ${r.problems.length === 0 ? 'none' : ''}`,
    ...r.problems.slice(0, 15).map((p) => `  - ${p.count} × ${p.line}`),
    '',
    `**${r.ok ? 'PASS' : 'FAIL'}**`,
  ];
  return lines;
}

export function markdown(r: RunReport): string {
  const out: string[] = [`## ${r.title}`, '', ...table(['setting', 'value'], r.settings), '', '### Set-up', ''];
  out.push(...table(['step', 'seconds'], [...r.steps.map((s) => [s.step, s1(s.seconds)]), ['helm install and the pool patched', s1(r.helmSeconds)]]));
  out.push('', '### From helm install to every server streaming', '');
  const t = r.streaming;
  out.push(
    `Half of the servers streamed ${s1(t.half)} s after \`helm install\`, every one ${t.all === null ? `not within the wait (${t.missing.length} missing)` : `${s1(t.all)} s after`}.`,
  );
  if (r.realStreaming.length > 0)
    out.push('', `The real PostgreSQL servers: ${r.realStreaming.map(([n, t]) => `${n} ${t === null ? 'not within the wait' : `${s1(t)} s`}`).join(', ')}.`);
  if (r.atStreaming !== null) out.push('', 'Then:', '', ...holdingsLines(r.atStreaming));
  if (r.kill !== null) {
    const k = r.kill;
    out.push('', '### A collector pod killed', '');
    out.push(
      `${k.pod} (its ${k.targets} servers) SIGKILLed through containerd: half of its servers streamed again ${s1(k.times.half)} s later, every one ${k.times.all === null ? `not within the wait (${k.times.missing.length} missing)` : `${s1(k.times.all)} s later`}.`,
    );
  }
  if (r.faults.length > 0) {
    out.push('', '### Soak: faults', '');
    out.push(
      ...table(
        ['at (s)', 'fault', 'what', 'servers', 'streaming again after (s)'],
        r.faults.map((f) => [s1(f.t), f.kind, f.detail, String(f.servers), s1(f.recovery)]),
      ),
    );
  }
  out.push('', '### Memory and CPU of the collector pods', '', ...resourceLines(r.samples));
  if (r.files.svg !== null) out.push('', `![lag and RSS over time](${r.files.svg})`);
  if (r.files.csv !== null) out.push('', `Every sample: [${r.files.csv}](${r.files.csv}).`);
  out.push('', '### Checks', '', ...checkLines(r), '');
  return out.join('\n');
}
