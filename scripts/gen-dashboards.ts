// Writes the chart's store dashboard (charts/pglog/dashboards/pglog-store.json) from
// scripts/dashboards/. `make dashboards` runs it; a unit test fails when the file differs.
//   node scripts/gen-dashboards.ts           write the file
//   node scripts/gen-dashboards.ts --check   write nothing; exit 1 when the file differs
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

import { STORE_DASHBOARD_FILE, storeDashboardText } from './dashboards/store-dashboard.ts';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const args = process.argv.slice(2);
if (args.some((a) => a !== '--check')) {
  console.error('gen-dashboards: usage: node scripts/gen-dashboards.ts [--check]');
  process.exit(2);
}
const file = join(root, STORE_DASHBOARD_FILE);
const text = storeDashboardText();
const current = existsSync(file) ? readFileSync(file, 'utf8') : undefined;
if (current === text) process.exit(0);
if (args.includes('--check')) {
  console.error(`${STORE_DASHBOARD_FILE} ${current === undefined ? 'is missing' : 'differs from scripts/dashboards/'}; run \`make dashboards\``);
  process.exit(1);
}
writeFileSync(file, text);
console.log(`wrote ${STORE_DASHBOARD_FILE}`);
