// `node bench/merge-section.ts DOC NAME FILE`: puts the markdown a benchmark wrote to FILE
// into DOC as section NAME (see lib/doc-section.ts). Used by `make bench`.
import { readFileSync } from 'node:fs';

import { writeSection } from './lib/doc-section.ts';

const [doc, name, file] = process.argv.slice(2);
if (doc === undefined || name === undefined || file === undefined) {
  process.stderr.write('usage: merge-section.ts DOC NAME FILE\n');
  process.exit(2);
}
writeSection(doc, name, readFileSync(file, 'utf8'));
process.stderr.write(`merge-section: ${name} → ${doc}\n`);
