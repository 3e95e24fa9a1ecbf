// The package boundaries of ADR 0017 are an ESLint rule (eslint.config.mjs, no-restricted-imports
// per workspace): run ESLint's own API on fixture texts placed in each package and check that a
// forbidden import fails and a permitted one passes, in sources and in tests.
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test } from 'node:test';

import { ESLint } from 'eslint';

const ROOT = join(import.meta.dirname, '../..');
// Only the boundary rule: the fixtures are not meant to satisfy every other rule.
const eslint = new ESLint({ cwd: ROOT, ruleFilter: ({ ruleId }) => ruleId === 'no-restricted-imports' });

/** The boundary messages ESLint reports for `text` as if it were the file `filePath`. */
async function boundaryErrors(filePath: string, text: string): Promise<string[]> {
  const [result] = await eslint.lintText(text, { filePath: join(ROOT, filePath) });
  assert.ok(result !== undefined);
  assert.deepEqual(
    result.messages.filter((m) => m.ruleId !== 'no-restricted-imports'),
    [],
    'only the boundary rule runs',
  );
  return result.messages.map((m) => m.message);
}

// Existing files of each package, so the type-aware parser knows them.
const OPERATOR_SRC = 'operator/src/desired/tuning.ts';
const COLLECTOR_SRC = 'collector/src/cluster/tuning.ts';
const COMMON_SRC = 'common/src/time/retry.ts';
const OPERATOR_TEST = 'operator/test/unit/desired/tuning.test.ts';
const COLLECTOR_TEST = 'collector/test/unit/collect/batcher.test.ts';

const forbidden: Array<[file: string, text: string, why: RegExp]> = [
  [OPERATOR_SRC, "import { PglogError } from '../../../common/src/errors.ts';\nexport const e = PglogError;\n", /by its name/],
  [OPERATOR_SRC, "import { Collector } from '@pglog/collector/collect/collector.ts';\nexport const c = Collector;\n", /may not import/],
  [COLLECTOR_SRC, "import type { PoolReconciler } from '@pglog/operator/controller/pool-reconciler.ts';\nexport type P = PoolReconciler;\n", /may not import/],
  [COLLECTOR_SRC, "import { COLLECT_USAGE } from '@pglog/cli/collect-config.ts';\nexport const u = COLLECT_USAGE;\n", /may not import/],
  [COLLECTOR_SRC, "import { sleep } from '@pglog/test-support/wait.ts';\nexport const s = sleep;\n", /may not import/],
  [
    COMMON_SRC,
    "import { createCollectorMetrics } from '@pglog/collector/observability/metrics.ts';\nexport const m = createCollectorMetrics;\n",
    /may not import/,
  ],
  [OPERATOR_TEST, "import { sleep } from '../../../collector/test/helpers/store-fixture.ts';\nexport const s = sleep;\n", /by its name/],
  [OPERATOR_TEST, "import { parseOperatorArgs } from '@pglog/cli/operator-command.ts';\nexport const p = parseOperatorArgs;\n", /may not import/],
  [COLLECTOR_TEST, "import { Collector } from '@pglog/operator/controller/controller.ts';\nexport const c = Collector;\n", /may not import/],
];

const permitted: Array<[file: string, text: string]> = [
  [
    OPERATOR_SRC,
    "import { PglogError } from '@pglog/common/errors.ts';\nimport { SHARDING } from '../sharding/index.ts';\nexport const e = [PglogError, SHARDING];\n",
  ],
  [COLLECTOR_SRC, "import { PglogError } from '@pglog/common/errors.ts';\nexport const e = PglogError;\n"],
  [
    OPERATOR_TEST,
    "import { FakeClock } from '@pglog/test-support/fake-clock.ts';\nimport { tuningFor } from '../../src/desired/tuning.ts';\nexport const f = [FakeClock, tuningFor];\n",
  ],
  [
    'cli/src/main.ts',
    "import { Collector } from '@pglog/collector/collect/collector.ts';\nimport { runOperator } from '@pglog/operator/controller/run-operator.ts';\nexport const r = [Collector, runOperator];\n",
  ],
];

test('an import across a boundary the ADR forbids fails the lint', async () => {
  for (const [file, text, why] of forbidden) {
    const errors = await boundaryErrors(file, text);
    assert.equal(errors.length, 1, `${file}: ${text}`);
    assert.match(errors[0]!, why);
  }
});

test('imports the ADR permits pass', async () => {
  for (const [file, text] of permitted) assert.deepEqual(await boundaryErrors(file, text), [], `${file}: ${text}`);
});
