// Benchmarks write their results into docs/benchmarks.md between markers of their own
// (`<!-- NAME:start -->` ... `<!-- NAME:end -->`), so hand-written notes around them survive
// every `make bench`.
import { readFileSync, writeFileSync } from 'node:fs';

/** Replaces (or appends) the section `name` of the markdown file `doc` with `markdown`. */
export function writeSection(doc: string, name: string, markdown: string): void {
  const start = `<!-- ${name}:start -->`;
  const end = `<!-- ${name}:end -->`;
  // A benchmark may already have wrapped its output in its markers: keep one pair, and only
  // what is between them (a benchmark's --out into a new file put the file's title before them).
  const wrapStart = markdown.indexOf(start);
  const wrapEnd = markdown.indexOf(end);
  const wrapped = wrapStart !== -1 && wrapEnd > wrapStart ? markdown.slice(wrapStart, wrapEnd + end.length) : markdown;
  const body = wrapped
    .split('\n')
    .filter((line) => line.trim() !== start && line.trim() !== end)
    .join('\n');
  const section = `${start}\n${body.trim()}\n${end}`;
  let text = '';
  try {
    text = readFileSync(doc, 'utf8');
  } catch {
    text = '# Benchmarks\n';
  }
  const at = text.indexOf(start);
  const until = text.indexOf(end);
  writeFileSync(doc, at !== -1 && until > at ? `${text.slice(0, at)}${section}${text.slice(until + end.length)}` : `${text.trimEnd()}\n\n${section}\n`);
}
