// `node bench/merge-section.ts DOC NAME FILE`: puts the markdown a benchmark wrote to FILE
// into DOC as section NAME (see lib/doc-section.ts). Used by `make bench`.
import { readFileSync } from 'node:fs';

import { writeSection } from './lib/doc-section.ts';

const [doc, name, file] = process.argv.slice(2);
if (doc === undefined || name === undefined || file === undefined) {
  process.stderr.write('usage: merge-section.ts DOC NAME FILE\n');
  process.exit(2);
}
const text = readFileSync(file, 'utf8');
// A benchmark's --out into a file of its own wraps the section in its markers under the title
// writeSection gives a new file: only what is between the markers is the section.
const start = text.indexOf(`<!-- ${name}:start -->`);
const end = text.indexOf(`<!-- ${name}:end -->`);
writeSection(doc, name, start !== -1 && end > start ? text.slice(start, end) : text);
process.stderr.write(`merge-section: ${name} → ${doc}\n`);
