// The header-comment rule of `make check` (header-comments.ts): which openings count as a
// header for TypeScript and for shell scripts.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { hasHeaderComment } from './header-comments.ts';

void test('a comment first counts, after blank lines and a #! line; code first does not', () => {
  assert.equal(hasHeaderComment('/** What this is. */\nexport {};\n', 'a.ts'), true);
  assert.equal(hasHeaderComment('\n\n// What this is.\nexport {};\n', 'a.ts'), true);
  assert.equal(hasHeaderComment('#!/usr/bin/env node\n/* What. */\n', 'a.mjs'), true);
  assert.equal(hasHeaderComment("import x from 'y';\n// late\n", 'a.ts'), false);
  assert.equal(hasHeaderComment('', 'a.ts'), false);
  assert.equal(hasHeaderComment('#!/usr/bin/env bash\n# What this does.\nset -e\n', 'a.sh'), true);
  assert.equal(hasHeaderComment('#!/usr/bin/env bash\nset -e\n', 'a.sh'), false);
  assert.equal(hasHeaderComment('// not a shell comment\n', 'a.sh'), false);
});
