// Which of Node's built-in modules `pglog collect` loads. An ES import of a built-in makes Node
// build its ES namespace by reading every export, and node:http's lazy WebSocket getters then
// load undici, http2, web streams and worker_threads that nothing here uses (about 3 MB of a
// collector's RSS: docs/benchmarks.md, "Built-in modules loaded through ES imports"). What it
// costs is measured there; this keeps a new ES import of node:http from bringing it back.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { test } from 'node:test';

const ROOT = join(import.meta.dirname, '..', '..', '..');

/** The built-in modules (by Node's internal name) loaded once `module` is imported, in a fresh process. */
function builtinsLoadedBy(module: string): string[] {
  const script = `await import(${JSON.stringify(module)}); console.log(JSON.stringify(process.moduleLoadList))`;
  const out = execFileSync(process.execPath, ['--disable-warning=ExperimentalWarning', '--input-type=module', '-e', script], {
    encoding: 'utf8',
    env: { ...process.env, NODE_DISABLE_COMPILE_CACHE: '1' },
  });
  return (JSON.parse(out) as string[]).filter((m) => m.startsWith('NativeModule ')).map((m) => m.slice('NativeModule '.length));
}

test("the collect command's modules load neither undici nor http2", () => {
  const loaded = builtinsLoadedBy(join(ROOT, 'cli', 'src', 'collect-command.ts'));
  assert.ok(loaded.includes('http'), 'the /metrics server needs node:http (the check would prove nothing without it)');
  for (const unwanted of ['internal/deps/undici/undici', 'http2']) assert.ok(!loaded.includes(unwanted), `${unwanted} is loaded`);
});

test('an ES import of node:http would (what the check guards against)', () => {
  const loaded = builtinsLoadedBy('node:http');
  assert.ok(loaded.includes('internal/deps/undici/undici'), 'when this fails, Node stopped loading undici for node:http and the workaround can go');
});
