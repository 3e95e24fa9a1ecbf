/**
 * MurmurHash3 x86_32 over the UTF-8 bytes of a string: fast, well mixed, and stable across
 * Node versions and platforms (the ring must not move when the operator is upgraded).
 * Not cryptographic; target and shard names are not adversarial input to the ring.
 */
const encoder = new TextEncoder();

const C1 = 0xcc9e2d51;
const C2 = 0x1b873593;

/** Reused for every call (the module is synchronous): no allocation per hash. */
let scratch = new Uint8Array(256);

export function murmur3(text: string, seed = 0): number {
  if (text.length * 3 > scratch.length) scratch = new Uint8Array(text.length * 3);
  const bytes = scratch;
  const length = encoder.encodeInto(text, bytes).written;
  const blocks = length & ~3;
  let h = seed | 0;
  for (let i = 0; i < blocks; i += 4) {
    let k = bytes[i]! | (bytes[i + 1]! << 8) | (bytes[i + 2]! << 16) | (bytes[i + 3]! << 24);
    k = Math.imul(k, C1);
    k = (k << 15) | (k >>> 17);
    k = Math.imul(k, C2);
    h ^= k;
    h = (h << 13) | (h >>> 19);
    h = (Math.imul(h, 5) + 0xe6546b64) | 0;
  }
  const rest = length & 3;
  if (rest > 0) {
    let k = 0;
    if (rest === 3) k ^= bytes[blocks + 2]! << 16;
    if (rest >= 2) k ^= bytes[blocks + 1]! << 8;
    k ^= bytes[blocks]!;
    k = Math.imul(k, C1);
    k = (k << 15) | (k >>> 17);
    k = Math.imul(k, C2);
    h ^= k;
  }
  h ^= length;
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}
