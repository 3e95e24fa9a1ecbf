/**
 * Draws a `make fleet` run's chart from what it printed, for a run stopped before its end (it
 * writes its CSV and chart only at the end; an hour's soak that had to be stopped keeps only its
 * log). The printed minutes carry the lag (p95, max) and each pod's RSS; the fault lines carry
 * their time since the install, which also places the log's clock.
 *
 *   node bench/fleet-node/chart-from-log.ts RUN.log OUT.svg [TITLE]
 */
import { readFileSync, writeFileSync } from 'node:fs';

import { drawChart, type Mark } from './chart.ts';
import type { Sample } from './samples.ts';

const [logFile, outFile, title = 'make fleet (from its log)'] = process.argv.slice(2);
if (logFile === undefined || outFile === undefined) throw new Error('usage: chart-from-log.ts RUN.log OUT.svg [TITLE]');

const clock = (mmss: string): number => {
  const [m, s] = mmss.split(':').map(Number);
  return m! * 60 + s!;
};

const lines = readFileSync(logFile, 'utf8').split('\n');
// "[32:32] fault: rotation-storm (1919 s after the install)": the log's clock minus the install.
let installAt: number | undefined;
const marks: Mark[] = [];
for (const line of lines) {
  const f = /^\[(\d+:\d\d)\] fault: (\S+) \((\d+) s after the install\)/.exec(line);
  if (f !== null) {
    installAt ??= clock(f[1]!) - Number(f[3]);
    marks.push({ t: Number(f[3]), label: f[2]! });
  }
}
if (installAt === undefined) throw new Error(`${logFile}: no fault line, so no time since the install to place the log's clock`);
for (const line of lines) {
  const k = /^\[(\d+:\d\d)\] killing (\S+) /.exec(line);
  if (k !== null) marks.unshift({ t: clock(k[1]!) - installAt, label: `${k[2]!} killed` });
}

const samples: Sample[] = [];
for (const line of lines) {
  const m = /^\[(\d+:\d\d)\]\s+lag p95 ([\d.]+) s, max ([\d.]+) s; RSS (.*)$/.exec(line);
  if (m === null) continue;
  // "main-0 212 MiB, main-1 239 MiB, ..."
  const pods = m[4]!.split(', ').map((part) => {
    const [pod, mib] = part.split(' ');
    return { pod: pod!, rssMiB: Number(mib), cores: 0 };
  });
  samples.push({ t: clock(m[1]!) - installAt, lagP95: Number(m[2]), lagMax: Number(m[3]), lagNone: 0, sshConnections: 0, storeConnections: 0, pods });
}
if (samples.length === 0) throw new Error(`${logFile}: no "lag p95 ... RSS ..." lines`);
writeFileSync(outFile, drawChart(title, samples, marks));
process.stdout.write(`${outFile}: ${samples.length} samples, ${marks.length} marks\n`);
