/**
 * `make check` step: no two source files import each other, directly or around a circle
 * (issue 17: a circle makes a file's room unclear and its load order fragile). Reads the
 * imports (relative, and of our packages by name) of every tracked TypeScript file under the
 * packages' src folders,
 * type-only ones included (a type circle is a design circle too), and prints each circle.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { dirname, join, normalize } from 'node:path';

import ts from 'typescript';

/** The relative imports and re-exports of one file, as repository paths (the compiler's own scan). Pure. */
export function importsOf(file: string, text: string): string[] {
  return ts
    .preProcessFile(text, true, false)
    .importedFiles.map((f) => f.fileName)
    .flatMap((name) => {
      if (name.startsWith('./') || name.startsWith('../')) return [normalize(join(dirname(file), name))];
      // A workspace package by name: @pglog/<package>/<path> is <package>/src/<path> (its "exports").
      const own = /^@pglog\/([a-z-]+)\/(.+)$/.exec(name);
      return own === null ? [] : [`${own[1]!}/src/${own[2]!}`];
    });
}

/** The circles of a graph (its strongly connected parts with more than one file), each sorted. Pure. */
export function findCycles(graph: ReadonlyMap<string, readonly string[]>): string[][] {
  let next = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const cycles: string[][] = [];
  // Iterative Tarjan: the graph has hundreds of files, recursion would do, but a deep chain should not matter.
  for (const root of graph.keys()) {
    if (index.has(root)) continue;
    const work: Array<{ node: string; edge: number }> = [{ node: root, edge: 0 }];
    index.set(root, next);
    low.set(root, next);
    next += 1;
    stack.push(root);
    onStack.add(root);
    while (work.length > 0) {
      const top = work[work.length - 1]!;
      const edges = (graph.get(top.node) ?? []).filter((n) => graph.has(n));
      if (top.edge < edges.length) {
        const w = edges[top.edge]!;
        top.edge += 1;
        if (!index.has(w)) {
          index.set(w, next);
          low.set(w, next);
          next += 1;
          stack.push(w);
          onStack.add(w);
          work.push({ node: w, edge: 0 });
        } else if (onStack.has(w)) {
          low.set(top.node, Math.min(low.get(top.node)!, index.get(w)!));
        }
        continue;
      }
      work.pop();
      const parent = work[work.length - 1];
      if (parent !== undefined) low.set(parent.node, Math.min(low.get(parent.node)!, low.get(top.node)!));
      if (low.get(top.node) === index.get(top.node)) {
        const part: string[] = [];
        for (;;) {
          const w = stack.pop()!;
          onStack.delete(w);
          part.push(w);
          if (w === top.node) break;
        }
        if (part.length > 1) cycles.push(part.sort());
      }
    }
  }
  return cycles;
}

function main(): number {
  const files = execFileSync('git', ['ls-files', '-z', 'common/src', 'collector/src', 'operator/src', 'cli/src', 'test-support/src'], { encoding: 'utf8' })
    .split('\0')
    .filter((f) => f.endsWith('.ts'));
  const graph = new Map(files.map((f) => [f, importsOf(f, readFileSync(f, 'utf8'))] as const));
  const cycles = findCycles(graph);
  for (const c of cycles) process.stderr.write(`import circle: ${c.join(' -> ')}\n`);
  process.stdout.write(`import circles: ${cycles.length} among ${files.length} files\n`);
  return cycles.length === 0 ? 0 : 1;
}

if (import.meta.main) process.exitCode = main();
