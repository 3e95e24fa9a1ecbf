/**
 * `make check` step: every TypeScript, JavaScript module and shell script in the repository
 * opens with a comment that says what the file is for (after a `#!` line, if any). The
 * habit is what lets a newcomer find their room file by file; this keeps new files to it.
 * Lists the files git tracks, so generated and ignored files are left alone.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';

const CHECKED = /\.(?:ts|mjs|sh)$/;

/** True when the first line that is not blank (nor a `#!` line) is a comment. Pure. */
export function hasHeaderComment(text: string, path: string): boolean {
  const lines = text.split('\n');
  let i = 0;
  if (lines[0]?.startsWith('#!') === true) i = 1;
  while (i < lines.length && (lines[i] ?? '').trim() === '') i += 1;
  const first = (lines[i] ?? '').trimStart();
  return path.endsWith('.sh') ? first.startsWith('#') : first.startsWith('//') || first.startsWith('/*');
}

function main(): number {
  const files = execFileSync('git', ['ls-files', '-z'], { encoding: 'utf8' })
    .split('\0')
    .filter((f) => CHECKED.test(f));
  const missing = files.filter((f) => !hasHeaderComment(readFileSync(f, 'utf8'), f));
  for (const f of missing) process.stderr.write(`${f}:1: no header comment: say what the file is for, and why, at its top\n`);
  process.stdout.write(`header comments: ${files.length - missing.length} of ${files.length} files\n`);
  return missing.length === 0 ? 0 : 1;
}

if (import.meta.main) process.exitCode = main();
