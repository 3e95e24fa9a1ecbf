/**
 * Guessing the log format and log_line_prefix from the first bytes of a log.
 *
 * detectFormat: over the sample's complete lines, counts lines that read as jsonlog (a JSON
 * object), csvlog (a row starting with a timestamp, with a pid and a severity in their
 * columns) and syslog (a syslog header); the format with most lines wins when it covers at
 * least half the lines. Otherwise stderr, when one of the known prefixes fits.
 *
 * detectPrefix: the known prefix matching the most lines (prefix + severity); ties go to the
 * prefix with more escapes (the more specific one).
 */
import { CsvRowReader, looksLikeCsvRow } from './csv-assembler.ts';
import { compilePrefix } from './prefix.ts';
import type { CompiledPrefix } from './prefix.ts';
import type { LogFormat } from './record.ts';
import { FIRST_AUX, parseSeverity } from './severity.ts';
import { parseSyslogHeader } from './syslog-assembler.ts';
import type { SyslogHeader } from './syslog-assembler.ts';

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

function countCsvRows(sample: Buffer, ls: [number, number][]): number {
  const r = new CsvRowReader();
  let n = 0;
  for (const [s, e] of ls) {
    if (!looksLikeCsvRow(sample, s, e)) continue;
    // A row may go on over the next lines: read what this line has.
    const k = r.read(sample, s, e);
    if (k < 12) {
      if (!r.open) continue;
      n++; // an entry whose message holds newlines: its first columns were fine so far
      continue;
    }
    const pidOk = r.fe[3]! > r.fs[3]! && /^\d+$/.test(sample.toString('latin1', r.fs[3], r.fe[3]));
    const sev = parseSeverity(Buffer.concat([sample.subarray(r.fs[11], r.fe[11]), Buffer.from(':')]), 0, r.fe[11]! - r.fs[11]! + 1);
    if (pidOk && sev >= 0 && sev < FIRST_AUX) n++;
  }
  return n;
}

export function detectFormat(sample: Buffer): LogFormat | null {
  const ls = lines(sample, LINE_LIMIT);
  if (ls.length === 0) return null;
  let json = 0, syslog = 0;
  const h: SyslogHeader = { timeFrom: 0, timeTo: 0, pid: 0, seq: -1, part: -1 };
  for (const [s, e] of ls) {
    if (sample[s] === 0x7b && sample[e - 1] === 0x7d) json++;
    else if (parseSyslogHeader(sample, s, e, h) >= 0) syslog++;
  }
  const csv = countCsvRows(sample, ls);
  const best = Math.max(json, csv, syslog);
  if (best > 0 && best * 2 >= ls.length) {
    if (best === json) return 'jsonlog';
    if (best === csv) return 'csvlog';
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
  let bestEscapes = -1;
  for (const p of KNOWN_PREFIXES) {
    const cp = compiledPrefix(p);
    let score = 0;
    for (let i = 0; i < starts.length; i++) if (cp.match(sample, starts[i]!, ends[i]!) >= 0) score++;
    const escapes = (p.match(/%[^%]/g) ?? []).length;
    if (score > bestScore || (score === bestScore && score > 0 && escapes > bestEscapes)) {
      best = p;
      bestScore = score;
      bestEscapes = escapes;
    }
  }
  return best;
}
