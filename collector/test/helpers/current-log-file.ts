// The log file a real PostgreSQL (test-support log-server.ts) writes now, for tests that write
// into it themselves (collect-bad-input, collect-store-outage).
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

/** The file current_logfiles names for stderr. */
export function currentLogFile(dataDirectory: string): string {
  const line = readFileSync(join(dataDirectory, 'current_logfiles'), 'utf8')
    .split('\n')
    .find((l) => l.startsWith('stderr '));
  if (line === undefined) throw new Error(`no stderr line in ${dataDirectory}/current_logfiles`);
  return join(dataDirectory, line.slice('stderr '.length));
}
