// Writes the CustomResourceDefinitions in crds/ (and charts/pglog/crds/) and docs/resources.md from the TypeScript
// resource types (operator/src/crd/generate.ts). `make crds` runs it.
//   node scripts/gen-crds.ts           write the files
//   node scripts/gen-crds.ts --check   write nothing; exit 1 naming each file that differs
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

import { generateFiles } from '@pglog/operator/crd/generate.ts';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const args = process.argv.slice(2);
const unknown = args.filter((a) => a !== '--check');
if (unknown.length > 0) {
  console.error(`gen-crds: unknown argument(s) ${unknown.join(' ')}; usage: node scripts/gen-crds.ts [--check]`);
  process.exit(2);
}
const check = args.includes('--check');

let stale = 0;
for (const file of generateFiles(root)) {
  const target = join(root, file.path);
  const current = existsSync(target) ? readFileSync(target, 'utf8') : undefined;
  if (current === file.text) continue;
  if (check) {
    console.error(`${file.path} ${current === undefined ? 'is missing' : 'differs from the types'}; run \`make crds\``);
    stale++;
  } else {
    mkdirSync(dirname(target), { recursive: true });
    writeFileSync(target, file.text);
    console.log(`wrote ${file.path}`);
  }
}
if (stale > 0) process.exit(1);
