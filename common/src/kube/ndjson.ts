/** Newline-delimited JSON over a byte stream (a watch response): lines split across chunks and multi-byte characters split across chunks are put back together. */
import { StringDecoder } from 'node:string_decoder';

export async function* ndjsonLines(chunks: AsyncIterable<Buffer | string>): AsyncGenerator<string> {
  const decoder = new StringDecoder('utf8');
  let pending = '';
  for await (const chunk of chunks) {
    pending += typeof chunk === 'string' ? chunk : decoder.write(chunk);
    let nl = pending.indexOf('\n');
    while (nl !== -1) {
      const line = pending.slice(0, nl).trim();
      pending = pending.slice(nl + 1);
      if (line !== '') yield line;
      nl = pending.indexOf('\n');
    }
  }
  const rest = (pending + decoder.end()).trim();
  if (rest !== '') yield rest;
}
