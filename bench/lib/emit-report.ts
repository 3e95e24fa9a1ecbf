/**
 * The end of a benchmark that prints a Markdown report: to stdout always, and with `--out FILE`
 * into that file as well (the docs page or the file a run is compared against).
 */
import { writeFileSync } from 'node:fs';

export function emitReport(text: string, out: string | undefined): void {
  process.stdout.write(`${text}\n`);
  if (out !== undefined) writeFileSync(out, text);
}
