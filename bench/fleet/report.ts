/**
 * The fleet benchmark's Markdown: one table per size, this tree beside the baseline (when one
 * ran) with their ratio, and the goals of issue 46 checked where they apply.
 */
import type { RateShape } from '@pglog/test-support/fleet-sim/rates.ts';

import type { PlainLogins } from './plain-ssh.ts';
import { formatProcesses } from './server-side.ts';
import type { StreamingTimes, VariantResult } from './standalone.ts';

export interface ReportContext {
  shape: RateShape;
  promoteBits: number;
  cpus: string;
  minutes: number;
  baseline: string | null;
}

const seconds = (t: StreamingTimes): string => (t.all === null ? `not all (${t.missing} missing)` : `${t.all.toFixed(0)} (half ${t.half?.toFixed(0) ?? '-'})`);
const mb = (bytes: number): string => (bytes / 1e6).toFixed(0);

/** Rows of one size: label and one cell per variant (a ratio column when two ran and both are numbers). */
function rows(v: readonly VariantResult[], plain: PlainLogins): Array<[string, ...string[]]> {
  const n = v[0]!.servers;
  const cell = (f: (r: VariantResult) => string): string[] => v.map(f);
  const ratio = (f: (r: VariantResult) => number | null): string[] => {
    const cells = v.map((r) => f(r));
    const shown = cells.map((x) => (x === null ? '-' : x >= 10 ? x.toFixed(1) : x.toFixed(3)));
    const [a, b] = cells;
    if (cells.length === 2 && a !== null && a !== undefined && b !== null && b !== undefined && b !== 0) shown.push(`${(a / b).toFixed(2)}`);
    return shown;
  };
  return [
    ['from start until every server streams, s', ...cell((r) => seconds(r.start))],
    ['collector CPU per idle target, ms/s', ...ratio((r) => r.idle.cpuMsPerSecondPerTarget)],
    ['collector RSS per target (idle), MB', ...ratio((r) => r.idle.rssBytes / n / 1e6)],
    ['collector RSS idle / under load / peak, MB', ...cell((r) => `${mb(r.idle.rssBytes)} / ${mb(r.load.rssBytes)} / ${mb(r.load.peakRssBytes)}`)],
    ['server CPU per idle followed log, ms/s', ...ratio((r) => r.idle.serverCpuMsPerSecondPerLog)],
    ['server processes per followed log (idle)', ...cell((r) => formatProcesses(r.idle.serverProcessesPerLog, n))],
    ['fleet load read, MB/s', ...ratio((r) => r.load.mbPerSecond)],
    ['collector CPU per MB above idle, ms', ...ratio((r) => r.load.cpuMsPerMb)],
    ['SSH connections (one process)', ...cell(() => String(n))],
    ['store connections', ...cell((r) => String(r.load.storeConnections))],
    ['store: statement rows a second', ...ratio((r) => r.load.rowsPerSecond)],
    ['store: database growth per MB of log, MB', ...ratio((r) => r.load.storeBytesPerLogMb / 1e6)],
    [`after a SIGKILL, until every server's next line is stored, s (plain OpenSSH logins: ${plain.seconds.toFixed(0)})`, ...cell((r) => seconds(r.recovery))],
    ['handshakes refused by sshd (MaxStartups)', ...cell((r) => String(r.refusedHandshakes))],
    [
      'markers: targets whole / missing 5 min after writing stopped / duplicated',
      ...cell(
        (r) =>
          `${r.check.whole} of ${r.check.targets} / ${r.check.lostMarkers} / ${r.check.duplicatedMarkers} (rows ${r.check.rowDifference >= 0 ? '+' : ''}${r.check.rowDifference})`,
      ),
    ],
  ];
}

/** The goals of issue 46 at this size, for this tree's collector. */
function goals(r: VariantResult, plain: PlainLogins): string {
  const n = r.servers;
  const rss = r.idle.rssBytes / n / 1e6;
  const limit = Math.max(60, 1.5 * plain.seconds);
  const recovered = r.recovery.all;
  return [
    `RSS per target ${rss.toFixed(3)} MB (goal at 1,000: at most 0.5): ${rss <= 0.5 ? 'met' : 'not met'}`,
    `idle CPU per target ${r.idle.cpuMsPerSecondPerTarget.toFixed(3)} ms/s (goal: at most 0.2): ${r.idle.cpuMsPerSecondPerTarget <= 0.2 ? 'met' : 'not met'}`,
    `recovery ${recovered === null ? 'incomplete' : `${recovered.toFixed(0)} s`} (goal: within 60 s or 1.5 × ${plain.seconds.toFixed(0)} s = ${limit.toFixed(0)} s): ${recovered !== null && recovered <= limit ? 'met' : 'not met'}`,
    `handshakes refused: ${r.refusedHandshakes} (goal: 0)`,
  ].join('; ');
}

export function fleetReport(results: ReadonlyArray<{ servers: number; plain: PlainLogins; variants: VariantResult[] }>, c: ReportContext): string {
  const out: string[] = [
    '## A fleet into one standalone collector',
    '',
    `\`node bench/fleet-bench.ts\`${c.baseline === null ? '' : ' with `--baseline` (another checkout beside this tree, each on a fresh fleet of the same seed)'}: ` +
      `N simulated servers (test-support/src/fleet-sim/), each a real OpenSSH sshd on an address of its own (MaxStartups 10:30:100, MaxSessions 10), ` +
      `one log each written at a log-normal rate (median ${c.shape.medianBytesPerSecond} B/s, σ ${c.shape.sigma}, capped at ${c.shape.capBytesPerSecond} B/s), ` +
      `rotated every 4 MiB as PostgreSQL rotates, a numbered marker ending every write; one known_hosts and one key for the fleet. ` +
      `One \`pglog collect --start-at oldest\` (the sidecar above ${(c.promoteBits / 1000).toFixed(0)} kbit/s: about 5 % of the servers) into a PostgreSQL 15 store, all on this machine (${c.cpus}). ` +
      `Phases: until every server's first marker is stored; 20 s, then idle for the idle figures (server figures: everything under the fleet's sshd listeners); ` +
      `the fleet writing for 30 s, then the load figures; a SIGKILL and a new process; writing stopped, every marker checked. ` +
      `Plain OpenSSH: \`ssh ... true\` to every server, ${results[0]?.plain.parallel ?? '-'} at a time. Measured ${new Date().toISOString().slice(0, 10)}, ${c.minutes.toFixed(0)} min.`,
  ];
  for (const r of results) {
    const names = r.variants.map((v) => v.name);
    const header = r.variants.length === 2 ? [...names, 'ratio'] : names;
    out.push('', `### ${r.servers} servers`, '', `| | ${header.join(' | ')} |`, `|---|${header.map(() => '---:').join('|')}|`);
    for (const [label, ...cells] of rows(r.variants, r.plain)) out.push(`| ${label} | ${cells.join(' | ')} |`);
    out.push('', `Goals (this tree): ${goals(r.variants[0]!, r.plain)}.`);
  }
  return out.join('\n');
}
