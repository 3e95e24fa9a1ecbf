/**
 * A fingerprint of a CustomResourceDefinition's content: the SHA-256 of its canonical JSON
 * (object keys sorted at every level), so the same CRD read back from its YAML file, whatever
 * the key order or line folding, has the same digest as the object the generator built.
 * `pglog crds apply` compares the CRDs it is given with the digests built into the image
 * (built-in-crds.ts) and applies nothing that differs. Pure; imports no TypeScript compiler,
 * so the image can run it.
 */
import { createHash } from 'node:crypto';

function canonical(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(canonical);
  if (typeof value !== 'object' || value === null) return value;
  return Object.fromEntries(
    Object.keys(value)
      .sort()
      .map((k) => [k, canonical((value as Record<string, unknown>)[k])]),
  );
}

export function crdDigest(crd: unknown): string {
  return createHash('sha256')
    .update(JSON.stringify(canonical(crd)))
    .digest('hex');
}
