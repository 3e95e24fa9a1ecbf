// `pglog report`'s options for the HTML report: --html FILE and --format html|json|text, one
// output option only. The page itself is tested with the renderer
// (collector/test/unit/report/html-render.test.ts).
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { parseReportArgs } from '@pglog/cli/report-command.ts';
import { isPglogError } from '@pglog/common/errors.ts';

test('--html FILE and --format html|json|text; one output option only', () => {
  const env = { PGLOG_STORE_URL: 'postgres://x@h/db' };
  const html = parseReportArgs(['--html', '/tmp/r.html'], env);
  assert.ok('html' in html && html.html?.file === '/tmp/r.html');
  const stdout = parseReportArgs(['--format', 'html'], env);
  assert.ok('html' in stdout && stdout.html?.file === null);
  const json = parseReportArgs(['--format', 'json'], env);
  assert.ok('json' in json && json.json && json.html === undefined);
  const text = parseReportArgs(['--format', 'text'], env);
  assert.ok('json' in text && !text.json && text.html === undefined);
  const usage = (e: unknown): boolean => isPglogError(e) && e.code === 'USAGE';
  assert.throws(() => parseReportArgs(['--format', 'pdf'], env), usage);
  assert.throws(() => parseReportArgs(['--json', '--html', 'x'], env), usage);
  assert.throws(() => parseReportArgs(['--format', 'json', '--json'], env), usage);
  assert.throws(() => parseReportArgs(['--html', ''], env), usage);
});
