// The segment script's idle wait: under bash (when the server has it) a loop that waits and
// looks for data with builtins only, no process per idle round; otherwise the POSIX polling loop.
// Checks the generated text, and that sh and bash parse it (`-n`, nothing is run), for a path
// full of quotes and `$`.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { describe, it } from 'node:test';

import { buildSegmentScript } from '../../../src/follow/segment-script.ts';
import { buildBuiltinWaitScript } from '../../../src/follow/segment-script-bash.ts';
import { shellQuote } from '../../../src/follow/shell-quote.ts';
import { segmentOptions } from '../../helpers/segment-options.ts';

const options = segmentOptions(`/var/log/it's "pg" $HOME`);

describe('segment script idle wait', () => {
  it('runs the builtin loop under bash when the server has bash, else the polling loop', () => {
    const command = buildSegmentScript(options);
    assert.ok(command.startsWith(`if command -v bash >/dev/null 2>&1; then exec bash -c ${shellQuote(buildBuiltinWaitScript(options))}; fi\n`));
    assert.ok(command.endsWith(buildSegmentScript({ ...options, idleWait: 'polling' })));
    assert.ok(!buildSegmentScript({ ...options, idleWait: 'polling' }).includes('bash'));
  });

  it('builds scripts their shells parse', () => {
    execFileSync('sh', ['-n', '-c', buildSegmentScript(options)]);
    execFileSync('bash', ['-n', '-c', buildBuiltinWaitScript(options)]);
  });

  it('waits and looks for data without a process in an idle round', () => {
    const script = buildBuiltinWaitScript(options);
    assert.ok(script.includes('exec 9<> <(:)'));
    assert.ok(script.includes('read -t 0.200 -u 9 z'));
    // bytes, not characters: the C locale, local to the function that reads and counts them
    assert.ok(script.includes(`take() {\n  local LC_ALL=C\n  IFS= read -r -d '' -n "$n" -u 3 c; r=$?`));
    // the full check backs off to one per heartbeat (10 rounds of 200 ms)
    assert.ok(script.includes('next_full=$((idle + 10))'));
  });

  it('waits the data interval after a round that read data, the poll after an idle one', () => {
    const script = buildBuiltinWaitScript({ ...options, dataIntervalMs: 400 });
    assert.ok(script.includes('nap_data() { read -t 0.400 -u 9 z; [ $? -gt 128 ] || sleep 0.400; }'));
    assert.match(script, /idle=0; next_full=1; held=-1\n +nap_data\n +continue/);
    assert.ok(buildSegmentScript({ ...options, dataIntervalMs: 400, idleWait: 'polling' }).includes('    idle=0\n    sleep 0.400\n'));
    // without one, it is the poll
    assert.ok(buildBuiltinWaitScript(options).includes('nap_data() { read -t 0.200 -u 9 z;'));
  });
});
