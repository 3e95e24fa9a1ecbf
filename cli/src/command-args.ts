/**
 * Command-line parsing shared by the commands: node:util's strict parseArgs, with its errors
 * (unknown option, missing value) turned into PglogError('USAGE') worded by the command.
 */
import { parseArgs, type ParseArgsConfig } from 'node:util';

import { PglogError } from '@pglog/common/errors.ts';

export function parseCommandArgs<T extends ParseArgsConfig>(config: T, usageMessage: (parserMessage: string) => string): ReturnType<typeof parseArgs<T>> {
  try {
    return parseArgs<T>(config);
  } catch (e) {
    throw new PglogError('USAGE', usageMessage((e as Error).message));
  }
}

/** parseArgs declarations of options that each take one string value, by name. */
export function stringOptions<const K extends string>(...names: K[]): Record<K, { type: 'string' }> {
  return Object.fromEntries(names.map((name) => [name, { type: 'string' }])) as Record<K, { type: 'string' }>;
}
