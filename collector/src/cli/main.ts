/**
 * The `pglog` command's entry point: the only place that reads process.argv, process.env
 * and the standard streams; everything below receives its configuration as arguments.
 */
import { isPglogError } from '../errors.ts';
import { PARSE_USAGE, parseParseArgs, runParse } from './parse-command.ts';

const USAGE = `usage: pglog COMMAND [OPTIONS]

commands:
  parse     parse PostgreSQL log files offline (summary or typed events)

${PARSE_USAGE}`;

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  switch (command) {
    case 'parse':
      return runParse(parseParseArgs(rest), { stdin: process.stdin, stdout: process.stdout, stderr: process.stderr });
    case undefined:
    case 'help':
    case '--help':
    case '-h':
      process.stdout.write(`${USAGE}\n`);
      return command === undefined ? 2 : 0;
    default:
      process.stderr.write(`pglog: unknown command '${command}'\n${USAGE}\n`);
      return 2;
  }
}

// An early-closed stdout (`pglog parse --events | head`) is not an error worth a stack trace.
process.stdout.on('error', (e: NodeJS.ErrnoException) => {
  if (e.code === 'EPIPE') process.exit(0);
  throw e;
});

try {
  process.exitCode = await main(process.argv.slice(2));
} catch (e) {
  if (isPglogError(e)) {
    process.stderr.write(`pglog: ${e.message}\n`);
    process.exitCode = e.code === 'USAGE' ? 2 : 1;
  } else {
    throw e;
  }
}
