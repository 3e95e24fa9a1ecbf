/**
 * Kubernetes resource quantities (`512Mi`, `1.5Gi`, `250m`, `1e9`, `2`) as numbers, so the
 * operator can size the V8 heap from a container's memory limit. The grammar is the one of
 * `k8s.io/apimachinery/pkg/api/resource`: a signed decimal number, then either a binary
 * suffix (powers of 1024), a decimal suffix (powers of 1000, including `m` for milli) or a
 * decimal exponent (`e`/`E` and a signed integer). Pure.
 */
import { PglogError } from '@pglog/common/errors.ts';

const BINARY_SUFFIXES: Readonly<Record<string, number>> = {
  Ki: 2 ** 10,
  Mi: 2 ** 20,
  Gi: 2 ** 30,
  Ti: 2 ** 40,
  Pi: 2 ** 50,
  Ei: 2 ** 60,
};
const DECIMAL_SUFFIXES: Readonly<Record<string, number>> = {
  n: 1e-9,
  u: 1e-6,
  m: 1e-3,
  '': 1,
  k: 1e3,
  M: 1e6,
  G: 1e9,
  T: 1e12,
  P: 1e15,
  E: 1e18,
};

// Number: digits with an optional fraction (or a bare fraction); then an exponent or a suffix.
// `E` alone is the exa suffix; `E` followed by digits is an exponent (as in Kubernetes).
const QUANTITY = /^([+-]?(?:\d+(?:\.\d*)?|\.\d+))(?:[eE]([+-]?\d+)|(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?)$/;

/** `512Mi` → 536870912, `250m` → 0.25, `1e3` → 1000; throws CONFIG_INVALID for anything else. */
export function parseQuantity(q: string): number {
  const m = QUANTITY.exec(q.trim());
  if (m === null || q.trim() === '') {
    throw new PglogError('CONFIG_INVALID', `'${q}' is not a Kubernetes quantity (examples: 512Mi, 1Gi, 250m, 1e9, 2)`);
  }
  const value = Number(m[1]);
  let scale: number;
  if (m[2] !== undefined) scale = 10 ** Number(m[2]);
  else {
    const suffix = m[3] ?? '';
    scale = BINARY_SUFFIXES[suffix] ?? DECIMAL_SUFFIXES[suffix]!;
  }
  const n = value * scale;
  if (!Number.isFinite(n)) throw new PglogError('CONFIG_INVALID', `quantity '${q}' is out of range`);
  return n;
}
