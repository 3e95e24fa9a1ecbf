// The LineSplitter's own cost, without reading: the file is loaded first (not timed), then
// split in 256 KiB chunks; reports its own elapsed time. Separates splitting from file I/O.
import { readFileSync } from 'node:fs';

import { LineSplitter } from '@pglog/collector/logformat/line-splitter.ts';

const data = readFileSync(process.argv[2]!);
const CHUNK = 256 * 1024;
let lines = 0;
const started = process.hrtime.bigint();
const splitter = new LineSplitter(() => {
  lines++;
});
for (let at = 0; at < data.length; at += CHUNK) splitter.push(data.subarray(at, Math.min(data.length, at + CHUNK)));
splitter.end();
const seconds = Number(process.hrtime.bigint() - started) / 1e9;
process.stdout.write(JSON.stringify({ lines, seconds }) + '\n');
