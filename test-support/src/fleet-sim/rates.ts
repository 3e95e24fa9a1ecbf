/**
 * The simulated fleet's log rates (pure, seeded): most servers quiet, a few hot, as a
 * log-normal distribution: median `medianBytesPerSecond`, spread `sigma` (the standard deviation
 * of the rate's natural logarithm), each draw capped at `capBytesPerSecond` so one server cannot
 * take what the machine has (it also runs the servers).
 *
 * With median m and spread σ, the share of servers above a rate r is 1 - Φ(ln(r/m)/σ); the
 * fleet's pool sets its sidecar threshold where a few percent are above (promotionThreshold).
 */
import { Rng } from '../statement-log.ts';

export interface RateShape {
  medianBytesPerSecond: number;
  sigma: number;
  capBytesPerSecond: number;
}

/** The fleet: median about 2 kB/s; σ 1 puts about 5 % above 5.2 times the median. */
export const DEFAULT_RATE_SHAPE: RateShape = { medianBytesPerSecond: 2000, sigma: 1, capBytesPerSecond: 64_000 };

/** `count` rates of the shape, the same for the same seed. */
export function drawRates(count: number, shape: RateShape, seed = 20261207): number[] {
  if (!(shape.medianBytesPerSecond > 0) || !(shape.sigma >= 0) || !(shape.capBytesPerSecond > 0)) {
    throw new RangeError(`a rate shape needs a positive median and cap and a spread >= 0, got ${JSON.stringify(shape)}`);
  }
  const rng = new Rng(seed);
  const uniform = (): number => (rng.next() + 0.5) / 4294967296;
  const rates: number[] = [];
  while (rates.length < count) {
    // Box-Muller: two independent standard normals from two uniforms in (0, 1).
    const radius = Math.sqrt(-2 * Math.log(uniform()));
    const angle = 2 * Math.PI * uniform();
    for (const z of [radius * Math.cos(angle), radius * Math.sin(angle)]) {
      if (rates.length < count) rates.push(Math.min(shape.capBytesPerSecond, Math.round(shape.medianBytesPerSecond * Math.exp(shape.sigma * z))));
    }
  }
  return rates;
}

/** The rate above which `share` (0..1) of the shape's servers log: the sidecar threshold for "a few percent". */
export function promotionThreshold(shape: RateShape, share: number): number {
  return shape.medianBytesPerSecond * Math.exp(shape.sigma * standardNormalQuantile(1 - share));
}

/** Φ⁻¹(p) by Acklam's rational approximation (relative error under 1.2e-9), 0 < p < 1. */
export function standardNormalQuantile(p: number): number {
  if (!(p > 0 && p < 1)) throw new RangeError(`a quantile needs 0 < p < 1, got ${p}`);
  const a = [-39.69683028665376, 220.9460984245205, -275.9285104469687, 138.357751867269, -30.66479806614716, 2.506628277459239];
  const b = [-54.47609879822406, 161.5858368580409, -155.6989798598866, 66.80131188771972, -13.28068155288572];
  const c = [-0.007784894002430293, -0.3223964580411365, -2.400758277161838, -2.549732539343734, 4.374664141464968, 2.938163982698783];
  const d = [0.007784695709041462, 0.3224671290700398, 2.445134137142996, 3.754408661907416];
  const tail = (q: number): number =>
    (((((c[0]! * q + c[1]!) * q + c[2]!) * q + c[3]!) * q + c[4]!) * q + c[5]!) / ((((d[0]! * q + d[1]!) * q + d[2]!) * q + d[3]!) * q + 1);
  if (p < 0.02425) return tail(Math.sqrt(-2 * Math.log(p)));
  if (p > 1 - 0.02425) return -tail(Math.sqrt(-2 * Math.log(1 - p)));
  const q = p - 0.5;
  const r = q * q;
  return (
    ((((((a[0]! * r + a[1]!) * r + a[2]!) * r + a[3]!) * r + a[4]!) * r + a[5]!) * q) / (((((b[0]! * r + b[1]!) * r + b[2]!) * r + b[3]!) * r + b[4]!) * r + 1)
  );
}
