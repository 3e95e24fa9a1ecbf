// `pglog collect` configuration: parsed and validated once, every mistake a USAGE error that
// names the option; the store URL from the flag, a file or the environment, never two at once.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { parseCollectArgs, parseSize } from '@pglog/cli/collect-config.ts';
import { parseBitRate } from '@pglog/cli/transport-config.ts';
import { DEFAULT_BATCHER_OPTIONS } from '@pglog/collector/collect/batcher.ts';
import { PglogError } from '@pglog/common/errors.ts';

const URL = 'postgresql://pglog:secret@store/pglog';
const noFile = (path: string): string => {
  throw Object.assign(new Error(`ENOENT ${path}`), { code: 'ENOENT' });
};
const usage =
  (fragment: RegExp) =>
  (e: unknown): boolean =>
    e instanceof PglogError && e.code === 'USAGE' && fragment.test(e.message);

describe('parseCollectArgs', () => {
  test('defaults', () => {
    const c = parseCollectArgs(['--targets', 't.yaml', '--store', URL], {}, noFile);
    assert.equal(c.targetsFile, 't.yaml');
    assert.equal(c.storeUrl, URL);
    assert.deepEqual(c.listen, { host: '127.0.0.1', port: 9187 });
    assert.equal(c.logLevel, 'info');
    assert.equal(c.startAt, 'newest');
    assert.deepEqual(c.batcher, DEFAULT_BATCHER_OPTIONS);
    assert.equal(c.stopTimeoutMs, 10_000);
    assert.equal(c.retentionDays, null);
  });

  test('every option', () => {
    const c = parseCollectArgs(
      [
        '--targets',
        't.yaml',
        '--listen',
        '[::1]:9000',
        '--log-level',
        'debug',
        '--start-at',
        'end',
        '--batch-rows',
        '100',
        '--batch-bytes',
        '2MiB',
        '--batch-ms',
        '50',
        '--memory-budget',
        '1GiB',
        '--target-memory-budget',
        '64MB',
        '--max-entry-bytes',
        '512KiB',
        '--retention-days',
        '7',
        '--stop-timeout',
        '5000',
        '--keepalive-ms',
        '1000',
      ],
      { PGLOG_STORE_URL: URL },
      noFile,
    );
    assert.deepEqual(c.listen, { host: '::1', port: 9000 });
    assert.equal(c.startAt, 'now');
    assert.equal(c.batcher.maxRows, 100);
    assert.equal(c.batcher.maxBytes, 2 * 1024 * 1024);
    assert.equal(c.batcher.budgetBytes, 1024 ** 3);
    assert.equal(c.batcher.targetBudgetBytes, 64 * 1024 * 1024);
    assert.equal(c.maxEntryBytes, 512 * 1024);
    assert.equal(c.retentionDays, 7);
    assert.equal(c.keepaliveIntervalMs, 1000);
    assert.equal(parseCollectArgs(['--targets', 't', '--store', URL, '--listen', 'off'], {}, noFile).listen, null);
  });

  test('--ssh-window: 512KiB by default, 64KiB to 2MiB', () => {
    assert.equal(parseCollectArgs(['--targets', 't', '--store', URL], {}, noFile).sshWindowBytes, 512 * 1024);
    assert.equal(parseCollectArgs(['--targets', 't', '--store', URL, '--ssh-window', '64KiB'], {}, noFile).sshWindowBytes, 64 * 1024);
    assert.equal(parseCollectArgs(['--targets', 't', '--store', URL, '--ssh-window', '2MiB'], {}, noFile).sshWindowBytes, 2 * 1024 * 1024);
    for (const bad of ['65535', '3MiB', 'wide']) {
      assert.throws(() => parseCollectArgs(['--targets', 't', '--store', URL, '--ssh-window', bad], {}, noFile), usage(/--ssh-window/));
    }
  });

  test('--store-connections: 4 by default, 1 to 64', () => {
    assert.equal(parseCollectArgs(['--targets', 't', '--store', URL], {}, noFile).storeConnections, 4);
    assert.equal(parseCollectArgs(['--targets', 't', '--store', URL, '--store-connections', '1'], {}, noFile).storeConnections, 1);
    assert.equal(parseCollectArgs(['--targets', 't', '--store', URL, '--store-connections', '64'], {}, noFile).storeConnections, 64);
    for (const bad of ['0', '65', '2.5', 'many']) {
      assert.throws(() => parseCollectArgs(['--targets', 't', '--store', URL, '--store-connections', bad], {}, noFile), usage(/--store-connections/), bad);
    }
  });

  test('the store URL: flag, file (first line) or environment; never two; never missing', () => {
    assert.equal(parseCollectArgs(['--targets', 't', '--store-file', 'f'], {}, () => `${URL}\nignored\n`).storeUrl, URL);
    assert.equal(parseCollectArgs(['--targets', 't'], { PGLOG_STORE_URL: URL }, noFile).storeUrl, URL);
    assert.equal(
      parseCollectArgs(['--targets', 't', '--store', URL], { PGLOG_STORE_URL: 'postgres://other/x' }, noFile).storeUrl,
      URL,
      'the flag wins over the environment',
    );
    assert.throws(() => parseCollectArgs(['--targets', 't', '--store', URL, '--store-file', 'f'], {}, noFile), usage(/not both/));
    assert.throws(() => parseCollectArgs(['--targets', 't'], {}, noFile), usage(/PGLOG_STORE_URL/));
    assert.throws(() => parseCollectArgs(['--targets', 't', '--store-file', 'missing'], {}, noFile), usage(/cannot read --store-file missing: ENOENT/));
    assert.throws(() => parseCollectArgs(['--targets', 't', '--store', 'mysql://x'], {}, noFile), usage(/postgres:\/\//));
  });

  test('mistakes are USAGE errors naming the option, and never echo the store URL', () => {
    const bad: Array<[string[], RegExp]> = [
      [['--store', URL], /--targets FILE is required/],
      [['--targets', 't', '--store', URL, '--log-level', 'loud'], /--log-level must be one of/],
      [['--targets', 't', '--store', URL, '--start-at', 'middle'], /--start-at must be newest, oldest, now/],
      [['--targets', 't', '--store', URL, '--batch-rows', '0'], /--batch-rows must be a whole number of at least 1/],
      [['--targets', 't', '--store', URL, '--batch-bytes', 'lots'], /--batch-bytes must be a size/],
      [['--targets', 't', '--store', URL, '--listen', '9187'], /--listen must be HOST:PORT or off/],
      [['--targets', 't', '--store', URL, '--listen', 'h:99999'], /--listen must be HOST:PORT or off/],
      [['--targets', 't', '--store', URL, '--memory-budget', '1MiB', '--target-memory-budget', '2MiB'], /must not exceed --memory-budget/],
      [['--targets', 't', '--store', URL, '--frobnicate'], /Unknown option '--frobnicate'/],
    ];
    for (const [argv, fragment] of bad) {
      assert.throws(
        () => parseCollectArgs(argv, {}, noFile),
        (e: unknown) => usage(fragment)(e) && !(e as Error).message.includes('secret'),
        argv.join(' '),
      );
    }
  });
});

describe('parseSize', () => {
  test('bytes and units, powers of 1024 as PostgreSQL reads them', () => {
    assert.equal(parseSize('1048576'), 1048576);
    assert.equal(parseSize('512KiB'), 512 * 1024);
    assert.equal(parseSize('64 MB'), 64 * 1024 * 1024);
    assert.equal(parseSize('1.5g'), 1.5 * 1024 ** 3);
    for (const bad of ['', '0', '-1', 'MiB', '12 parsecs', '1e9']) assert.equal(parseSize(bad), null, bad);
  });
});

describe('transport options', () => {
  test('defaults: promote above 1.25 Mbit/s, demote below 0.75, dwell 60 s, capacity 64, sidecar as a child', () => {
    const t = parseCollectArgs(['--targets', 't', '--store', URL], {}, noFile).transport;
    assert.deepEqual(t.policy, { promoteAboveBitsPerS: 1.25e6, demoteBelowBitsPerS: 0.75e6, minDwellMs: 60_000, proxyCapacity: 64, swapFactor: 0 });
    assert.equal(t.sidecar, 'child');
    assert.equal(t.sidecarDir, null);
    assert.equal(t.rateTimeConstantMs, 30_000);
  });

  test('rates with units, pinned sidecar directory, and mistakes as USAGE errors', () => {
    const t = parseCollectArgs(
      [
        '--targets',
        't',
        '--store',
        URL,
        '--promote-above',
        '2Mbit/s',
        '--demote-below',
        '500kbit',
        '--min-dwell',
        '0',
        '--proxy-capacity',
        '3',
        '--sshproxy',
        'external',
        '--sshproxy-dir',
        '/run/pglog',
      ],
      {},
      noFile,
    ).transport;
    assert.equal(t.policy.promoteAboveBitsPerS, 2e6);
    assert.equal(t.policy.demoteBelowBitsPerS, 5e5);
    assert.equal(t.policy.minDwellMs, 0);
    assert.equal(t.policy.proxyCapacity, 3);
    assert.deepEqual([t.sidecar, t.sidecarDir], ['external', '/run/pglog']);
    assert.equal(parseBitRate('1000000'), 1e6);
    assert.equal(parseBitRate('1.25Mbit'), 1.25e6);
    assert.equal(parseBitRate('1Gbit/s'), 1e9);
    assert.equal(parseBitRate('fast'), null);
    const bad: Array<[string[], RegExp]> = [
      [['--promote-above', '1Mbit', '--demote-below', '1Mbit'], /flap/],
      [['--promote-above', 'fast'], /--promote-above must be a rate/],
      [['--sshproxy', 'sometimes'], /--sshproxy must be child, external or off/],
      [['--sshproxy', 'external'], /needs --sshproxy-dir/],
      [['--proxy-capacity=1.5'], /--proxy-capacity must be a whole number/],
    ];
    for (const [argv, fragment] of bad)
      assert.throws(() => parseCollectArgs(['--targets', 't', '--store', URL, ...argv], {}, noFile), usage(fragment), argv.join(' '));
  });
});
