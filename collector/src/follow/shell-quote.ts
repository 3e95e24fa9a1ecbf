/**
 * Quoting for the POSIX sh scripts pglog runs on servers. Every value that reaches a script
 * (paths, numbers) goes through here, so a log directory named `it's "here" $(x)` is data,
 * never code.
 */

/** `value` as one single-quoted sh word: `'` becomes `'\''`, nothing else is special inside quotes. */
export function shellQuote(value: string): string {
  if (value.includes('\0')) throw new Error('a shell argument cannot contain a NUL byte');
  return `'${value.replaceAll("'", `'\\''`)}'`;
}

/** A non-negative safe integer rendered for a script (refuses anything else: no injection through numbers). */
export function shellInteger(value: number): string {
  if (!Number.isSafeInteger(value) || value < 0) throw new Error(`not a non-negative integer: ${value}`);
  return String(value);
}
