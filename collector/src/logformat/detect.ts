/**
 * Guessing the log format and log_line_prefix from the first bytes of a log.
 *
 * detectFormat: the share of the sample's complete lines that are JSON objects (jsonlog) or
 * carry a syslog header (syslog), and the share of csv rows with a pid and a known severity
 * in their columns (csvlog); the best share wins when it is at least one half. Otherwise
 * stderr, when one of the known prefixes fits.
 *
 * detectPrefix: the known prefix matching the most lines (prefix + severity). Ties go to the
 * prefix that matched more lines in full (not cut at %q), then to the one with more escapes.
 * A sample with only background-process lines cannot tell '%m [%p] ' from
 * '%m [%p] %q%u@%d ': the shorter one is chosen then.
 */
import { CsvAssembler } from './csv-assembler.ts';
import { LineSplitter } from './line-splitter.ts';
import type { CompiledPrefix } from './prefix.ts';
import { compilePrefix } from './prefix.ts';
import type { LogFormat } from './record.ts';
import { MAIN_SEVERITIES } from './severity.ts';
import type { SyslogHeader } from './syslog-assembler.ts';
import { parseSyslogHeader } from './syslog-assembler.ts';

/** log_line_prefix values seen in the wild, most common first. */
export const KNOWN_PREFIXES: readonly string[] = [
  '%m [%p] ', // PostgreSQL's default (10+)
  '%m [%p] %q%u@%d ', // Debian / Ubuntu default
  '%t [%p]: [%l-1] user=%u,db=%d,app=%a,client=%h ', // pgBadger's recommendation
  '%m [%p]: [%l-1] user=%u,db=%d,app=%a,client=%h ',
  '%t [%p]: [%l-1] user=%u,db=%d ',
  '%m [%p]: [%l-1] user=%u,db=%d ',
  '%t [%p]: [%l-1] ',
  '%m [%p]: [%l-1] ',
  '%t [%p]: ',
  '%m [%p]: ',
  '%m %u@%d [%p] ',
  '%t [%p-%l] %q%u@%d ',
  '%m [%p-%l] %q%u@%d ',
  '%t [%p] %q%u@%d ',
  '%t [%p] ',
  '%m [%p] %u@%d ',
  '%m [%p] %q%u@%d %a ',
  '%m [%p] %q[%u@%d] ',
  '%t:%r:%u@%d:[%p]:', // Amazon RDS
  '%m:%r:%u@%d:[%p]:',
  '< %m > ', // old RPM default
  '< %t > ',
  '%m ',
  '%t ',
  // Common with syslog, which logs time and pid itself.
  'user=%u,db=%d,app=%a,client=%h ',
  'user=%u,db=%d ',
  '%q%u@%d ',
  '[%l-1] user=%u,db=%d,app=%a,client=%h ',
  '[%l-1] user=%u,db=%d ',
  '',
];

const compiled = new Map<string, CompiledPrefix>();
function compiledPrefix(p: string): CompiledPrefix {
  let c = compiled.get(p);
  if (c === undefined) {
    c = compilePrefix(p);
    compiled.set(p, c);
  }
  return c;
}

/** [from, to) of the sample's complete lines (a final line without `\n` is left out unless it is the only one). */
function lines(sample: Buffer, limit: number): [number, number][] {
  const out: [number, number][] = [];
  let pos = 0;
  while (pos < sample.length && out.length < limit) {
    const nl = sample.indexOf(10, pos);
    if (nl < 0) {
      if (out.length === 0) out.push([pos, sample.length]);
      break;
    }
    let end = nl;
    if (end > pos && sample[end - 1] === 13) end--;
    if (end > pos) out.push([pos, end]);
    pos = nl + 1;
  }
  return out;
}

const LINE_LIMIT = 500;

/** csvlog rows in the sample: [rows with a pid and a known severity, all complete rows]. */
function csvRows(sample: Buffer): [number, number] {
  let good = 0;
  let all = 0;
  const a = new CsvAssembler((r) => {
    all++;
    if (r.pid !== null && MAIN.has(r.severity)) good++;
  });
  const s = new LineSplitter((b, f, t, o, n, tr) => a.pushLine(b, f, t, o, n, tr));
  const end = sample.lastIndexOf(10);
  s.push(end < 0 ? sample : sample.subarray(0, end + 1));
  s.end();
  // No flush: a row still open at the end of the sample is not counted.
  return [good, all];
}

const MAIN = new Set<string>(MAIN_SEVERITIES);

export function detectFormat(sample: Buffer): LogFormat | null {
  const ls = lines(sample, LINE_LIMIT);
  if (ls.length === 0) return null;
  let json = 0,
    syslog = 0;
  const h: SyslogHeader = { timeFrom: 0, timeTo: 0, pid: 0, seq: -1, part: -1 };
  for (const [s, e] of ls) {
    if (sample[s] === 0x7b && sample[e - 1] === 0x7d) json++;
    else if (parseSyslogHeader(sample, s, e, h) >= 0) syslog++;
  }
  const [good, rows] = csvRows(sample);
  const fj = json / ls.length;
  const fs = syslog / ls.length;
  const fc = rows > 0 ? good / rows : 0;
  const best = Math.max(fj, fs, fc);
  if (best >= 0.5) {
    if (best === fj) return 'jsonlog';
    if (best === fc) return 'csvlog';
    return 'syslog';
  }
  return detectPrefix(sample, 'stderr') !== null ? 'stderr' : null;
}

export function detectPrefix(sample: Buffer, format: 'stderr' | 'syslog'): string | null {
  const ls = lines(sample, LINE_LIMIT);
  const h: SyslogHeader = { timeFrom: 0, timeTo: 0, pid: 0, seq: -1, part: -1 };
  const starts: number[] = [];
  const ends: number[] = [];
  for (const [s, e] of ls) {
    let t = s;
    if (format === 'syslog') {
      t = parseSyslogHeader(sample, s, e, h);
      if (t < 0) continue;
    }
    const c = sample[t];
    if (c === 0x09 || (c === 0x23 && sample[t + 1] === 0x30)) continue; // continuation lines
    starts.push(t);
    ends.push(e);
  }
  let best: string | null = null;
  let bestScore = 0;
  let bestFull = -1;
  let bestEscapes = -1;
  for (const p of KNOWN_PREFIXES) {
    const cp = compiledPrefix(p);
    let score = 0;
    let full = 0;
    for (let i = 0; i < starts.length; i++) {
      if (cp.match(sample, starts[i]!, ends[i]!) >= 0) {
        score++;
        if (!cp.cutAtQ) full++;
      }
    }
    cp.forget(); // the cached prefix must not keep the sample alive
    const escapes = (p.match(/%[^%]/g) ?? []).length;
    if (score === 0) continue;
    if (score > bestScore || (score === bestScore && (full > bestFull || (full === bestFull && escapes > bestEscapes)))) {
      best = p;
      bestScore = score;
      bestFull = full;
      bestEscapes = escapes;
    }
  }
  return best;
}
