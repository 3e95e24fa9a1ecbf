// The import-circle rule of `make check` (import-cycles.ts): relative imports read from
// source text, and circles found in small graphs, including a long one and a self-free DAG.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { findCycles, importsOf } from './import-cycles.ts';

void test('imports and re-exports by relative path, type-only ones too; packages are not ours', () => {
  const text =
    "import a from './a.ts';\nimport type { B } from '../b/b.ts';\nexport { c } from './c.ts';\nimport pg from 'pg';\nconst s = \"from './not-an-import.ts'\";\n";
  assert.deepEqual(importsOf('x/y/file.ts', text), ['x/y/a.ts', 'x/b/b.ts', 'x/y/c.ts']);
});

void test('circles of two and of four are found, a diamond is not one', () => {
  const graph = new Map<string, string[]>([
    ['a', ['b']],
    ['b', ['a']],
    ['p', ['q']],
    ['q', ['r']],
    ['r', ['s']],
    ['s', ['p', 'x']],
    ['top', ['left', 'right']],
    ['left', ['bottom']],
    ['right', ['bottom']],
    ['bottom', []],
    ['x', []],
  ]);
  assert.deepEqual(
    findCycles(graph).sort((l, r) => l[0]!.localeCompare(r[0]!)),
    [
      ['a', 'b'],
      ['p', 'q', 'r', 's'],
    ],
  );
  assert.deepEqual(
    findCycles(
      new Map([
        ['top', ['left']],
        ['left', ['bottom']],
        ['bottom', []],
      ]),
    ),
    [],
  );
});
