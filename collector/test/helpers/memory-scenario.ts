/**
 * A child process for memory-bounds.test.ts (run with `--expose-gc`): feeds adversarial log
 * content of a given size through the real LogParser, with one template cache and one
 * `pglog parse` summary as the collector and the CLI keep them, and prints what stays
 * retained after a full GC as JSON: heapUsed + arrayBuffers beyond the baseline, plus the
 * structures' own byte accounting.
 *
 *   node --expose-gc memory-scenario.ts <scenario> <megabytes> <cache bytes> <summary bytes>
 *
 * Scenarios: `failing` (distinct giant failing statements, review F5), `statements` (distinct
 * mid-sized executed statements: each template just under the cache's size limit), `names`
 * (distinct giant application and database names in csvlog rows), `pending` (one stderr entry
 * of millions of one-byte continuation lines, held until it ends).
 */
import { LogParser, type LogParserOptions } from '../../src/logformat/log-parser.ts';
import { TemplateCache } from '../../src/logformat/normalize/normalize.ts';
import { SummaryBuilder } from '../../src/parse/summary.ts';

const [scenario, megabytes, cacheBytes, summaryBytes] = process.argv.slice(2);
if (scenario === undefined) throw new Error('usage: memory-scenario.ts <scenario> <megabytes> <cache bytes> <summary bytes>');
const target = Number(megabytes) * 1e6;
const gc = (globalThis as { gc?: () => void }).gc;
if (gc === undefined) throw new Error('run with --expose-gc');

/** A full GC, and time for the array buffer sweeper to free what it found. */
async function settle(): Promise<NodeJS.MemoryUsage> {
  for (let i = 0; i < 4; i++) {
    gc!();
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  return process.memoryUsage();
}

const templates = new TemplateCache({ maxBytes: Number(cacheBytes) });
const summary = new SummaryBuilder({ maxBytes: Number(summaryBytes) });
const encodings = { defaultEncoding: 'UTF8', databases: {} };
let events = 0;
const onEvent: ConstructorParameters<typeof LogParser>[1] = (e) => {
  events++;
  summary.add(e);
};
const options: LogParserOptions =
  scenario === 'names' ? { format: 'csvlog', encodings, templates } : { format: 'stderr', prefix: '%m [%p] %q%u@%d ', encodings, templates };
const before = await settle();
const parser = new LogParser(options, onEvent);

const TS = '2024-05-01 10:00:00.000 UTC';
let fed = 0;
function push(text: string): void {
  const b = Buffer.from(text);
  fed += b.length;
  parser.push(b);
}

for (let i = 0; fed < target; i++) {
  switch (scenario) {
    case 'failing': // 100 kB of one distinct identifier per statement, a Cyrillic letter making it two bytes a character
      push(
        `${TS} [${1000 + (i % 30000)}] app@db ERROR:  syntax error at end of input\n${TS} [${1000 + (i % 30000)}] app@db STATEMENT:  SELECT t${i}.ж${'c'.repeat(100_000)} FROM\n`,
      );
      break;
    case 'statements': // distinct templates of 4,000 bytes: each cacheable, 40 MB of them
      push(`${TS} [${1000 + (i % 30000)}] app@db LOG:  duration: ${i % 97}.5 ms  statement: SELECT c${i}, ${'x'.repeat(4000 - 40)} FROM t WHERE a = ${i}\n`);
      break;
    case 'names': {
      // csvlog: 64 kB distinct user, database and application names
      const big = (what: string): string => `${what}${i}${'n'.repeat(64_000)}`;
      push(
        `${TS},"${big('u')}","${big('d')}",${1000 + i},"[local]",s${i},1,"SELECT",${TS},1/1,0,LOG,00000,"duration: 1.000 ms  statement: SELECT ${i}",,,,,,,,,"${big('a')}","client backend",,0\n`,
      );
      break;
    }
    case 'pending':
      if (i === 0) push(`${TS} [1] app@db LOG:  a message of many lines\n`);
      push('\t\n'.repeat(32_768));
      break;
    default:
      throw new Error(`unknown scenario ${scenario}`);
  }
}
// Measured before the entry ends: an entry still being assembled is what the parser holds.
const during = await settle();
parser.end();
const after = await settle();
const retained = (m: NodeJS.MemoryUsage): number => m.heapUsed + m.arrayBuffers - before.heapUsed - before.arrayBuffers;
process.stdout.write(
  `${JSON.stringify({
    scenario,
    fed,
    events,
    retained: Math.max(retained(during), retained(after)),
    cacheBytes: templates.bytes,
    cacheEvictions: templates.evictions,
    cacheUncached: templates.uncached,
    summaryBytes: summary.bytes,
    // Kept alive until measured: the parser, the cache and the summary are what is being measured.
    alive: [parser, templates, summary].length,
  })}\n`,
);
