/**
 * What the HTML report inlines: uPlot's script and styles, read from node_modules (the
 * `uplot` dependency; the image's `npm ci --omit=dev` installs it), the page's script
 * (client.js beside this file) and its styles. Read once per process.
 */
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';

import { PglogError } from '@pglog/common/errors.ts';

import type { Assets } from './render.ts';

const CSS = `
:root { font-family: system-ui, sans-serif; font-size: 14px; color: #222; background: #fff; }
body { margin: 0; }
header { position: sticky; top: 0; z-index: 10; background: #f5f6f8; border-bottom: 1px solid #ddd; padding: 6px 16px; }
h1 { font-size: 18px; margin: 4px 0; display: inline-block; margin-right: 12px; }
.window { display: inline-block; margin: 0; color: #444; }
.utc { margin-left: 16px; }
nav a { margin-right: 12px; color: #1f5fa8; text-decoration: none; }
main { padding: 0 16px 24px; }
section { border-bottom: 1px solid #eee; padding-bottom: 12px; }
h2 { font-size: 17px; margin: 18px 0 8px; }
h3 { font-size: 14px; margin: 14px 0 6px; }
h4 { margin: 10px 0 4px; }
.sort, .note, .meta, .of { color: #666; font-weight: normal; font-size: 12px; }
.cards { display: flex; flex-wrap: wrap; gap: 8px; }
.card { border: 1px solid #ddd; border-radius: 4px; padding: 6px 10px; min-width: 120px; }
.card .label { color: #666; font-size: 12px; }
.card .value { font-size: 18px; }
.charts { display: flex; flex-wrap: wrap; gap: 12px; }
.chart-box { margin: 0; flex: 1 1 480px; min-width: 320px; }
figcaption { font-size: 12px; color: #444; }
.chart { min-height: 240px; }
table { border-collapse: collapse; font-size: 12px; max-width: 100%; }
th, td { border-bottom: 1px solid #eee; padding: 3px 6px; vertical-align: top; }
th { text-align: left; background: #fafafa; }
td.num, th.num { text-align: right; white-space: nowrap; }
td.code .q { font-family: ui-monospace, monospace; display: inline-block; max-width: 60ch; overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }
pre { background: #f7f7f7; border: 1px solid #e5e5e5; padding: 6px; white-space: pre-wrap; word-break: break-word; max-height: 400px; overflow: auto; }
.drill-row { cursor: pointer; }
.drill-row:hover { background: #eef4fb; }
.drill { border: 1px solid #9bb9dd; border-radius: 4px; padding: 4px 12px; margin-top: 10px; background: #fbfdff; }
.tabs .tab { border: 1px solid #ccc; background: #f5f5f5; padding: 3px 10px; cursor: pointer; }
.tabs .tab.active { background: #1f5fa8; color: #fff; }
.empty, .none { color: #999; }
footer { color: #888; font-size: 12px; padding: 8px 16px; }
`;

let cached: Promise<Assets> | null = null;

/** The assets, read once; PglogError INPUT_UNREADABLE when uPlot is missing from node_modules. */
export function loadAssets(): Promise<Assets> {
  cached ??= readAssets();
  return cached;
}

async function readAssets(): Promise<Assets> {
  const require = createRequire(import.meta.url);
  try {
    const [uplotJs, uplotCss, clientJs] = await Promise.all([
      readFile(require.resolve('uplot/dist/uPlot.iife.min.js'), 'utf8'),
      readFile(require.resolve('uplot/dist/uPlot.min.css'), 'utf8'),
      readFile(new URL('./client.js', import.meta.url), 'utf8'),
    ]);
    return { uplotJs, uplotCss, clientJs, css: CSS };
  } catch (e) {
    cached = null;
    throw new PglogError(
      'INPUT_UNREADABLE',
      `the HTML report's scripts cannot be read (is the uplot package installed?): ${e instanceof Error ? e.message : String(e)}`,
      { cause: e },
    );
  }
}
