// Every pglog command answers --help and -h with its usage on standard output and exit 0,
// through the real launcher, even when the options it needs to run are missing.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { runPglog } from '@pglog/test-support/cli.ts';

const COMMANDS: ReadonlyArray<{ args: string[]; usage: string }> = [
  { args: ['collect'], usage: 'usage: pglog collect ' },
  { args: ['parse'], usage: 'usage: pglog parse ' },
  { args: ['report'], usage: 'usage: pglog report ' },
  { args: ['report', 'locks'], usage: 'usage: pglog report locks ' },
  { args: ['report', 'activity'], usage: 'usage: pglog report activity ' },
  { args: ['sshproxy'], usage: 'usage: pglog sshproxy ' },
  { args: ['operator'], usage: 'usage: pglog operator ' },
  { args: ['crds'], usage: 'usage: pglog crds apply ' },
  { args: ['crds', 'apply'], usage: 'usage: pglog crds apply ' },
];

for (const { args, usage } of COMMANDS) {
  for (const flag of ['--help', '-h']) {
    test(`pglog ${args.join(' ')} ${flag} prints its usage and exits 0`, async () => {
      const r = await runPglog([...args, flag]);
      assert.equal(r.code, 0, r.stderr);
      assert.ok(r.stdout.startsWith(usage), r.stdout);
      assert.equal(r.stderr, '');
    });
  }
}

test('help after other options still answers (pglog collect --shard x --help)', async () => {
  const r = await runPglog(['collect', '--shard', 'x', '--log-level', 'debug', '--help']);
  assert.equal(r.code, 0, r.stderr);
  assert.ok(r.stdout.startsWith('usage: pglog collect '));
});

test('pglog help, --help and -h print the whole usage and exit 0', async () => {
  for (const flag of ['help', '--help', '-h']) {
    const r = await runPglog([flag]);
    assert.equal(r.code, 0, r.stderr);
    assert.ok(r.stdout.startsWith('usage: pglog COMMAND'));
  }
});

test('-h after -- is an operand, not a help request (pglog parse -- -h reads a file named -h)', async () => {
  const r = await runPglog(['parse', '--', '-h']);
  assert.notEqual(r.code, 0);
  assert.doesNotMatch(r.stdout, /^usage:/);
});
