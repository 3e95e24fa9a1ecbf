// pglog's LineSplitter alone: bytes to line boundaries, a handler that only counts. Reads the
// file the way `pglog parse` does (collector/src/parse/input.ts, 256 KiB chunks).
import { PassThrough } from 'node:stream';

import { LineSplitter } from '@pglog/collector/logformat/line-splitter.ts';
import { readInput } from '@pglog/collector/parse/input.ts';

const file = process.argv[2]!;
let lines = 0;
const splitter = new LineSplitter(() => {
  lines++;
});
for await (const chunk of readInput(file, new PassThrough())) splitter.push(chunk);
splitter.end();
process.stdout.write(JSON.stringify({ lines }) + '\n');
