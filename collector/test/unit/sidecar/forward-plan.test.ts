// SQL forwards in the sidecar's pure parts: desired.json validation, the forward plan (which
// forwards to open, which are lost with their master, which to remove), the slot-0 master a
// forward needs, and the OpenSSH command lines.
import { strict as assert } from 'node:assert';
import { describe, test } from 'node:test';

import { type DesiredForward, type DesiredServer, parseDesiredState, parseSidecarStatus } from '@pglog/common/sidecar/contract.ts';
import fc from 'fast-check';

import { applyForwardPlan, type ForwardSnapshot, isEmptyForwardPlan, planForwards } from '../../../src/sidecar/forward-plan.ts';
import { forwardClientArgs, forwardSocketPath, masterArgs, MAX_DIR_LENGTH } from '../../../src/sidecar/openssh-args.ts';
import { meaningfulLines } from '../../../src/sidecar/openssh-errors.ts';
import { applyPlan, reconcile } from '../../../src/sidecar/reconcile.ts';

const server: DesiredServer = {
  name: 'db',
  host: '10.0.0.5',
  port: 22,
  user: 'postgres',
  identityFile: 'db.key',
  knownHostsFile: 'db.kh',
  maxSessions: 10,
  serverAliveIntervalS: 5,
  connectTimeoutS: 5,
};
const fwd = (id: string, remoteSocket = '/var/run/postgresql/.s.PGSQL.5432', port = 5432, srv = 'db'): DesiredForward => ({
  id,
  server: srv,
  remoteSocket,
  port,
});

function desiredText(forwards: unknown): string {
  return JSON.stringify({ version: 1, generation: 3, servers: [server], streams: [], forwards });
}

describe('desired.json: forwards', () => {
  test('valid forwards parse; a file without forwards has none', () => {
    const d = parseDesiredState(desiredText([fwd('f1'), fwd('main_2', '/tmp/.s.PGSQL.5433', 5433)]));
    assert.deepEqual(d.forwards, [fwd('f1'), fwd('main_2', '/tmp/.s.PGSQL.5433', 5433)]);
    assert.deepEqual(parseDesiredState(JSON.stringify({ version: 1, generation: 1, servers: [], streams: [] })).forwards, []);
  });

  test('refused: forwards that are not a list (the whole file)', () =>
    assert.throws(() => parseDesiredState(desiredText({ id: 'x' })), /forwards must be a list/));

  // A wrong forward is refused alone: reported with why, the good forward beside it applies.
  const good = fwd('ok', '/tmp/.s.PGSQL.6000', 6000);
  const refused: Array<[string, unknown[], RegExp]> = [
    ['an id too long for the socket path', [fwd('a'.repeat(17))], /forwards\[1\]\.id: .* is not 1-16 characters/],
    ['an id with a dot', [fwd('..')], /forwards\[1\]\.id/],
    ['an id with a slash', [fwd('a/b')], /forwards\[1\]\.id/],
    ['an id listed twice', [fwd('f1'), fwd('f1', '/tmp/.s.PGSQL.1', 1)], /forwards\[2\]\.id: f1 is listed twice/],
    ['an unknown server', [fwd('f1', undefined, undefined, 'other')], /forwards\[1\]\.server: no server named other/],
    ['a relative socket path', [fwd('f1', 'run/.s.PGSQL.5432')], /remoteSocket: .* is not an absolute path/],
    ['a colon, which ssh -L splits at', [fwd('f1', '/tmp/a:b/.s.PGSQL.5432')], /remoteSocket: .* OpenSSH would read as syntax/],
    ['a percent token', [fwd('f1', '/tmp/%h/.s.PGSQL.5432')], /OpenSSH would read as syntax/],
    ['a blank', [fwd('f1', '/tmp/a b/.s.PGSQL.5432')], /OpenSSH would read as syntax/],
    ['a newline', [fwd('f1', '/tmp/a\nb')], /OpenSSH would read as syntax/],
    ['a path longer than sun_path', [fwd('f1', `/${'x'.repeat(107)}`)], /longer than the 107 bytes/],
    ['port 0', [fwd('f1', undefined, 0)], /forwards\[1\]\.port must be an integer in 1\.\.65535/],
    ['a fractional port', [fwd('f1', undefined, 5432.5)], /port must be an integer/],
    ['a missing remote socket', [{ id: 'f1', server: 'db', port: 5432 }], /remoteSocket must be a string/],
  ];
  for (const [what, forwards, message] of refused) {
    test(`refused alone: ${what}`, () => {
      const d = parseDesiredState(desiredText([good, ...forwards]));
      // Applied: the good one, and the first of an id listed twice.
      assert.deepEqual(d.forwards, forwards.length === 2 ? [good, forwards[0]] : [good]);
      const messages = [...Object.values(d.refused.forwards).map((r) => r.error.message), ...d.refused.unnamed];
      assert.equal(messages.length, 1, JSON.stringify(d.refused));
      assert.match(messages[0] ?? '', message);
      for (const r of Object.values(d.refused.forwards)) assert.equal(r.error.code, 'CONFIG_INVALID');
    });
  }

  test('status.json written before forwards existed reads as having none', () => {
    const s = parseSidecarStatus(
      JSON.stringify({ version: 1, instance: 'i', pid: 1, startedAt: 'x', updatedAt: 'y', appliedGeneration: 1, masters: [], streams: {} }),
    );
    assert.deepEqual(s.forwards, {});
  });
});

describe('forward plan', () => {
  const up = (connection: number): Map<string, number> => new Map([['db', connection]]);
  const down = new Map<string, number>();

  test('a new forward waits for its master, then opens on it', () => {
    const p1 = planForwards([fwd('f1')], [], down, 0);
    assert.deepEqual(p1.add, [fwd('f1')]);
    assert.deepEqual(p1.open, []);
    const s1 = applyForwardPlan([], p1);
    const p2 = planForwards([fwd('f1')], s1, up(7), 0);
    assert.deepEqual(p2.open, [{ id: 'f1', connection: 7 }]);
    const s2 = applyForwardPlan(s1, p2);
    assert.equal(s2[0]?.phase, 'opening');
    assert.ok(isEmptyForwardPlan(planForwards([fwd('f1')], s2, up(7), 0)), 'an opening forward is not asked for twice');
  });

  test('a forward ready on a master that ended is lost, and opened again on the next master', () => {
    const ready: ForwardSnapshot[] = [{ ...fwd('f1'), phase: 'ready', connection: 7, retryAt: 0 }];
    assert.ok(isEmptyForwardPlan(planForwards([fwd('f1')], ready, up(7), 0)));
    const lost = planForwards([fwd('f1')], ready, down, 0);
    assert.deepEqual(lost, { remove: [], add: [], lost: ['f1'], open: [] });
    const replaced = planForwards([fwd('f1')], ready, up(8), 0);
    assert.deepEqual(replaced.lost, ['f1']);
    assert.deepEqual(replaced.open, [{ id: 'f1', connection: 8 }]);
  });

  test('a failed forward is tried again at retryAt on the same master, at once on a new one', () => {
    const failed: ForwardSnapshot[] = [{ ...fwd('f1'), phase: 'failed', connection: 7, retryAt: 1000 }];
    assert.ok(isEmptyForwardPlan(planForwards([fwd('f1')], failed, up(7), 999)));
    assert.deepEqual(planForwards([fwd('f1')], failed, up(7), 1000).open, [{ id: 'f1', connection: 7 }]);
    assert.deepEqual(planForwards([fwd('f1')], failed, up(9), 0).open, [{ id: 'f1', connection: 9 }]);
    assert.deepEqual(planForwards([fwd('f1')], failed, down, 5000), { remove: [], add: [], lost: ['f1'], open: [] });
  });

  test('removed forwards are removed; a changed one is removed first and added by a later plan', () => {
    const current: ForwardSnapshot[] = [
      { ...fwd('f1'), phase: 'ready', connection: 7, retryAt: 0 },
      { ...fwd('f2', '/tmp/.s.PGSQL.5433', 5433), phase: 'pending', connection: null, retryAt: 0 },
    ];
    const changed = fwd('f1', '/run/other/.s.PGSQL.5432');
    const p = planForwards([changed], current, up(7), 0);
    assert.deepEqual(p.remove.sort(), ['f1', 'f2']);
    assert.deepEqual(p.add, []);
    const p2 = planForwards([changed], applyForwardPlan(current, p), up(7), 0);
    assert.deepEqual(p2.add, [changed]);
    assert.deepEqual(p2.open, [{ id: 'f1', connection: 7 }]);
  });

  test('properties: every desired forward is tracked, nothing else; with its master up each is opening, ready, or failed awaiting its retry; a second plan does nothing', () => {
    const arbForward = fc.record({
      id: fc.constantFrom('f1', 'f2', 'f3', 'f4'),
      server: fc.constantFrom('a', 'b'),
      remoteSocket: fc.constantFrom('/r/.s.PGSQL.1', '/r/.s.PGSQL.2'),
      port: fc.constantFrom(1, 2),
    });
    const arbSnapshot = fc.record({
      id: fc.constantFrom('f1', 'f2', 'f3', 'f4'),
      server: fc.constantFrom('a', 'b'),
      remoteSocket: fc.constantFrom('/r/.s.PGSQL.1', '/r/.s.PGSQL.2'),
      port: fc.constantFrom(1, 2),
      phase: fc.constantFrom('pending' as const, 'opening' as const, 'ready' as const, 'failed' as const),
      connection: fc.option(fc.constantFrom(1, 2, 3), { nil: null }),
      retryAt: fc.constantFrom(0, 2000),
    });
    fc.assert(
      fc.property(
        fc.uniqueArray(arbForward, { selector: (f) => f.id, maxLength: 4 }),
        fc.uniqueArray(arbSnapshot, { selector: (f) => f.id, maxLength: 4 }),
        fc.record({ a: fc.option(fc.constantFrom(1, 2, 3), { nil: null }), b: fc.option(fc.constantFrom(1, 2, 3), { nil: null }) }),
        (desired, current, masters) => {
          const upMap = new Map<string, number>();
          if (masters.a !== null) upMap.set('a', masters.a);
          if (masters.b !== null) upMap.set('b', masters.b);
          // Settle removals first (a changed forward comes back one plan later).
          let snap = applyForwardPlan(current, planForwards(desired, current, upMap, 1000));
          const plan = planForwards(desired, snap, upMap, 1000);
          snap = applyForwardPlan(snap, plan);
          assert.deepEqual(snap.map((f) => f.id).sort(), desired.map((f) => f.id).sort());
          for (const f of snap) {
            const c = upMap.get(f.server);
            if (f.phase === 'ready') assert.equal(f.connection, c, 'ready only on the current master');
            if (c === undefined) assert.ok(f.phase === 'pending' || f.phase === 'opening', `${f.id} ${f.phase} without a master`);
            // A refusal on this same master waits for its retry time; anything else is under way or done.
            else if (f.phase === 'failed') assert.ok(f.connection === c && f.retryAt > 1000, JSON.stringify(f));
            else if (f.phase !== 'opening') assert.equal(f.phase, 'ready');
          }
          assert.ok(isEmptyForwardPlan(planForwards(desired, snap, upMap, 1000)));
        },
      ),
      { numRuns: 2000 },
    );
  });
});

describe('reconcile: forwards need slot 0', () => {
  test('a server with forwards and no streams gets its slot-0 master; without them it is stopped', () => {
    const withForward = { version: 1 as const, generation: 1, servers: [server], streams: [], forwards: [fwd('f1')] };
    const plan = reconcile(withForward, { masters: [], streams: [] });
    assert.deepEqual(
      plan.startMasters.map((m) => [m.server, m.slot]),
      [['db', 0]],
    );
    const after = applyPlan({ masters: [], streams: [] }, plan);
    const gone = reconcile({ ...withForward, forwards: [] }, after);
    assert.deepEqual(gone.stopMasters, [{ server: 'db', slot: 0 }]);
  });
});

describe('OpenSSH command lines for forwards', () => {
  test('the master binds forwarded sockets replacing stale files, for its owner only', () => {
    const argv = masterArgs('/run/pglog', server, 0);
    const opts = argv.filter((_, i) => argv[i - 1] === '-o');
    assert.ok(opts.includes('StreamLocalBindUnlink=yes'));
    assert.ok(opts.includes('StreamLocalBindMask=0177'));
  });

  test('the mux client: -O forward|cancel -L local:remote on the control socket, and no ClearAllForwardings (it would drop its -L)', () => {
    const local = forwardSocketPath('/run/pglog', 'f1', 5432);
    assert.equal(local, '/run/pglog/sql/f1/.s.PGSQL.5432');
    const argv = forwardClientArgs('/run/pglog', server, 0, 'forward', local, '/var/run/postgresql/.s.PGSQL.5432');
    assert.deepEqual(argv.slice(0, 2), ['-F', '/dev/null']);
    assert.equal(argv[argv.indexOf('-O') + 1], 'forward');
    assert.equal(argv[argv.indexOf('-L') + 1], `${local}:/var/run/postgresql/.s.PGSQL.5432`);
    assert.ok(argv.includes('ControlMaster=no'));
    assert.ok(!argv.some((a) => a.startsWith('ClearAllForwardings')));
    assert.deepEqual(argv.slice(-5), ['-p', '22', '-l', 'postgres', '10.0.0.5']);
    assert.equal(forwardClientArgs('/run/pglog', server, 0, 'cancel', local, '/x')[argv.indexOf('-O') + 1], 'cancel');
  });

  test('the longest directory, id and port still fit a Unix socket path', () => {
    const path = forwardSocketPath(`/${'d'.repeat(MAX_DIR_LENGTH - 1)}`, 'f'.repeat(16), 65535);
    assert.ok(Buffer.byteLength(path) <= 107, `${Buffer.byteLength(path)} bytes`);
  });

  test("a master's lines about refused forwarded connections do not explain why it ended", () => {
    assert.deepEqual(meaningfulLines('channel 1: open failed: connect failed: open failed\r\nTimeout, server 10.0.0.5 not responding.\r\n'), [
      'Timeout, server 10.0.0.5 not responding.',
    ]);
  });
});
