// One parser for the whole-number flags of every CLI command (collect, sshproxy, operator),
// so that they all accept the same forms and fail with the same USAGE message.
import { PglogError } from '@pglog/common/errors.ts';

/**
 * A whole-number command-line option of `command` (`collect`, `sshproxy`): `fallback` when
 * absent, else an integer of at least `min`; anything else is a USAGE error naming the option.
 */
export function wholeNumberOption(command: string, flag: string, text: string | undefined, fallback: number, min: number): number {
  if (text === undefined) return fallback;
  const n = Number(text);
  if (!Number.isSafeInteger(n) || n < min) throw new PglogError('USAGE', `${command}: ${flag} must be a whole number of at least ${min}, got '${text}'`);
  return n;
}
