/**
 * Duration statistics with bounded memory: exact count, sum, min, max, mean and standard
 * deviation (Welford's online algorithm), and percentiles from log-scaled buckets whose
 * width is 1% of their value, so a percentile is within 1% of the exact one whatever the
 * number of samples. A summary of a 50 GB log costs the same memory as one of 50 MB.
 *
 * Memory: one Map entry per bucket in use, at most about 72,000 whatever the values (the
 * whole range of a double). A caller with a byte budget can refuse new buckets
 * (`add(value, false)`): the value still counts in count, sum, min, max, mean and standard
 * deviation, and percentiles are then taken over the samples that have a bucket.
 */

/** Relative width of a bucket: percentiles are exact to within this factor. */
export const RELATIVE_ERROR = 0.01;
/** Values at or below this (ms) share bucket 0; PostgreSQL logs durations in microseconds. */
const MIN_VALUE = 0.001;
const LOG_BASE = Math.log1p(RELATIVE_ERROR);

export class DurationStats {
  count = 0;
  sum = 0;
  min = Infinity;
  max = -Infinity;
  private mean = 0;
  private m2 = 0;
  /** Bucket index to count; sparse because one template's durations cluster in few buckets. */
  private readonly buckets = new Map<number, number>();
  /** Samples counted in a bucket (all of them unless new buckets were refused). */
  private bucketed = 0;

  /** Buckets in use (each a Map entry: what the histogram costs). */
  get bucketCount(): number {
    return this.buckets.size;
  }

  /** Adds a sample; with `newBucket` false, a sample whose bucket is not in use yet gets none (see the module comment). */
  add(value: number, newBucket = true): void {
    if (!Number.isFinite(value) || value < 0) return;
    this.count++;
    this.sum += value;
    if (value < this.min) this.min = value;
    if (value > this.max) this.max = value;
    const delta = value - this.mean;
    this.mean += delta / this.count;
    this.m2 += delta * (value - this.mean);
    const index = bucketOf(value);
    const inBucket = this.buckets.get(index);
    if (inBucket === undefined && !newBucket) return;
    this.buckets.set(index, (inBucket ?? 0) + 1);
    this.bucketed++;
  }

  /** Adds another accumulator's samples, as if they had been added here. */
  merge(other: DurationStats): void {
    if (other.count === 0) return;
    const count = this.count + other.count;
    const delta = other.mean - this.mean;
    this.m2 += other.m2 + (delta * delta * this.count * other.count) / count;
    this.mean += (delta * other.count) / count;
    this.count = count;
    this.sum += other.sum;
    this.min = Math.min(this.min, other.min);
    this.max = Math.max(this.max, other.max);
    this.bucketed += other.bucketed;
    for (const [index, n] of other.buckets) this.buckets.set(index, (this.buckets.get(index) ?? 0) + n);
  }

  get average(): number {
    return this.count === 0 ? 0 : this.mean;
  }

  /** Population standard deviation (pg_stat_statements reports the same). */
  get stddev(): number {
    return this.count === 0 ? 0 : Math.sqrt(this.m2 / this.count);
  }

  /** The q-quantile (0 < q <= 1), nearest-rank, clamped to the exact min and max. */
  quantile(q: number): number {
    if (this.count === 0) return 0;
    if (this.bucketed === 0) return this.max;
    const rank = Math.max(1, Math.ceil(q * this.bucketed));
    const indexes = [...this.buckets.keys()].sort((a, b) => a - b);
    let seen = 0;
    for (const index of indexes) {
      seen += this.buckets.get(index) ?? 0;
      if (seen >= rank) return Math.min(this.max, Math.max(this.min, valueOf(index)));
    }
    return this.max;
  }
}

function bucketOf(value: number): number {
  return value <= MIN_VALUE ? 0 : Math.ceil(Math.log(value / MIN_VALUE) / LOG_BASE);
}

/** The upper bound of a bucket: the reported value is never below the samples in it. */
function valueOf(index: number): number {
  return index === 0 ? MIN_VALUE : MIN_VALUE * Math.exp(index * LOG_BASE);
}
