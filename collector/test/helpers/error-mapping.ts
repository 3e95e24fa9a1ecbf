// The table tests of an error mapping (ssh-errors, sql-errors): one test per case, each
// checking the pglog code, where the message starts and what it says, and the original cause.
import { strict as assert } from 'node:assert';
import { test } from 'node:test';

import type { PglogError } from '@pglog/common/errors.ts';

/** [test name, the error thrown, the pglog code it maps to, what the message must say]. */
export type ErrorCase = [name: string, error: unknown, code: string, message: RegExp];

/** A test per case: `map(error)` has the code, a message starting with `prefix` and matching, and `error` as its cause. */
export function errorMappingTests(cases: readonly ErrorCase[], map: (error: unknown) => PglogError, prefix: string): void {
  for (const [name, error, code, message] of cases) {
    test(name, () => {
      const mapped = map(error);
      assert.equal(mapped.code, code);
      assert.ok(mapped.message.startsWith(prefix), mapped.message);
      assert.match(mapped.message, message);
      assert.equal(mapped.cause, error);
    });
  }
}
