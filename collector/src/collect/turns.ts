/**
 * Turns on the event loop for the streams' parsing. A stream goes from one chunk to the next
 * in a chain of promises: when its transport has data buffered, the next chunk is there at
 * once and no I/O callback separates them, so fifty streams let go by the store together
 * parse (and map and encode, ADR 0019) one after another without the loop ever running timers,
 * sockets or /metrics: 70 to 140 ms at a time at 20 MB/s offered (docs/benchmarks.md).
 *
 * After each slice a stream asks `mayGoOn()`: true while the loop has been busy for less than
 * TURN_MS in its current iteration, so the common case (one stream's data, a quiet loop) costs
 * a clock read. Past it the stream awaits `nextTurn()`: waiting streams are resumed one per
 * loop iteration, in the order they asked, so the loop gets a turn between any two of them.
 */

/** How long the streams may hold the loop before they take turns. */
export const TURN_MS = 4;

/** When the loop's current iteration started being busy with streams (-1: not yet). */
let busySince = -1;
const waiting: Array<() => void> = [];

function notBusy(): void {
  busySince = -1;
}

/** True while the streams have held the loop for less than TURN_MS in this iteration. */
export function mayGoOn(): boolean {
  const now = performance.now();
  if (busySince < 0) {
    busySince = now;
    // The check phase runs after every I/O callback of the iteration: the busy span ends there.
    setImmediate(notBusy);
    return true;
  }
  return now - busySince < TURN_MS;
}

/** Resolves in a later loop iteration than any stream that asked before. */
export function nextTurn(): Promise<void> {
  return new Promise((resolve) => {
    waiting.push(resolve);
    if (waiting.length === 1) setImmediate(resumeOne);
  });
}

function resumeOne(): void {
  const resolve = waiting.shift();
  // An immediate queued from an immediate runs in the next iteration: one stream per turn.
  if (waiting.length > 0) setImmediate(resumeOne);
  busySince = -1;
  resolve?.();
}
