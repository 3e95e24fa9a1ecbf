// Reference: Node's readline over a file stream (one string per line).
import { createReadStream } from 'node:fs';
import { createInterface } from 'node:readline';

const file = process.argv[2]!;
let lines = 0;
for await (const _line of createInterface({ input: createReadStream(file), crlfDelay: Infinity })) lines++;
process.stdout.write(JSON.stringify({ lines }) + '\n');
