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
    assert.ok(script.includes('  read -t "$t" -u 9 z; [ $? -gt 128 ] || sleep "$t"'));
    assert.ok(script.includes('w=200; t=0.200;'));
    // bytes, not characters: the C locale, local to the function that reads and counts them
    assert.ok(script.includes(`take() {\n  local LC_ALL=C\n  IFS= read -r -d '' -n "$n" -u 3 c; r=$?`));
    // the first heartbeat of a silence: full checks at its rounds 1, 2, 4, 8 ...; then heartbeats by time
    assert.ok(script.includes('if [ "$idle" -ge "$next_full" ]; then full; say size "$size"; next_full=$((idle * 2)); fi'));
    assert.ok(script.includes('next_beat=$((quiet + 2000))'));
  });

  it('waits longer once a silence lasted a heartbeat, up to idlePollMaxMs, and takes the size with stat every sizeCheckMs', () => {
    const script = buildBuiltinWaitScript({ ...options, idlePollMaxMs: 1000, sizeCheckMs: 10_000 });
    assert.ok(script.includes('  if [ "$quiet" -ge 2000 ] && [ "$w" -lt 1000 ]; then\n    w=$((w * 2)); [ "$w" -gt 1000 ] && w=1000'));
    assert.ok(script.includes('if [ "$quiet" -ge "$next_size" ] || { [ ! -s /dev/fd/3 ] && [ "$p" != 0 ]; }; then'));
    assert.ok(script.includes('next_size=$((quiet + 10000))'));
    // Without them: the poll throughout, and the size at every heartbeat (the loop of ADR 0014).
    const plain = buildBuiltinWaitScript(options);
    assert.ok(plain.includes('next_beat=2000; next_size=2000;'));
    assert.ok(plain.includes('if [ "$quiet" -ge 2000 ] && [ "$w" -lt 200 ]; then'));
  });

  it('waits the data interval after a round that read data, the poll after an idle one', () => {
    const script = buildBuiltinWaitScript({ ...options, dataIntervalMs: 400 });
    assert.ok(script.includes('dw=400; td=0.400'));
    assert.ok(script.includes('  read -t "$td" -u 9 z; [ $? -gt 128 ] || sleep "$td"'));
    // Without dataIntervalMaxMs the wait never grows; with it, a small round doubles it up to the max.
    assert.ok(script.includes('next_dw=$((dw * 2)); [ "$next_dw" -gt 400 ] && next_dw=400'));
    assert.ok(
      buildBuiltinWaitScript({ ...options, dataIntervalMs: 400, dataIntervalMaxMs: 3200 }).includes(
        '[ "$got" -ge 16384 ]; then next_dw=400; else next_dw=$((dw * 2)); [ "$next_dw" -gt 3200 ] && next_dw=3200',
      ),
    );
    assert.match(
      script,
      /idle=0; quiet=0; w=200; t=0\.200; next_full=1; next_beat=2000; next_size=2000; next_rot=1000; held=-1\n.*next_dw.*\n +nap_data\n +continue/,
    );
    assert.ok(buildSegmentScript({ ...options, dataIntervalMs: 400, idleWait: 'polling' }).includes('    idle=0\n    sleep 0.400\n'));
    // without one, it is the poll
    assert.ok(buildBuiltinWaitScript(options).includes('dw=200; td=0.200'));
  });
});
