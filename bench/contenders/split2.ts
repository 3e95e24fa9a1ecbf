// Reference: the split2 transform (one string per line), as many log shippers use it.
import { createReadStream } from 'node:fs';
import { pipeline } from 'node:stream/promises';

import split2 from 'split2';

const file = process.argv[2]!;
let lines = 0;
await pipeline(createReadStream(file), split2(), async function (source: AsyncIterable<string>) {
  for await (const _line of source) lines++;
});
process.stdout.write(JSON.stringify({ lines }) + '\n');
