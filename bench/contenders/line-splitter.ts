// pglog's LineSplitter alone: bytes to line boundaries, a handler that only counts.
import { createReadStream } from 'node:fs';
import { LineSplitter } from '../../collector/src/protocol/line-splitter.ts';

const file = process.argv[2]!;
let lines = 0;
const splitter = new LineSplitter(() => { lines++; });
for await (const chunk of createReadStream(file, { highWaterMark: 64 * 1024 })) splitter.push(chunk as Buffer);
splitter.end();
process.stdout.write(JSON.stringify({ lines }) + '\n');
