// Leader election on a real kube-apiserver: one of two candidates leads; a leader that dies
// without releasing is replaced within about a lease duration; a clean stop hands over at
// once; a leader that cannot reach the API server stops leading within its renew deadline.
import assert from 'node:assert/strict';
import { afterEach, describe, test } from 'node:test';

import { createKubeClient } from '@pglog/common/kube/client.ts';
import type { KubeClient } from '@pglog/common/kube/client-types.ts';
import { LeaderElector, type LeaderElectorOptions, type Lease } from '@pglog/common/kube/leader-election.ts';
import { LEASES } from '@pglog/common/kube/resources.ts';
import { sleep } from '@pglog/test-support/wait.ts';

import { adminConfig, useSharedKube } from '../helpers/shared-control-plane.ts';
import { startTcpProxy } from '../helpers/tcp-proxy.ts';

/** This file's namespace on the shared control plane (shared-control-plane.ts). */
const NS = 'kube-leader-election';

const TIMING = { leaseDurationMs: 3000, renewDeadlineMs: 2000, retryPeriodMs: 300 };

async function until(what: string, check: () => boolean, timeoutMs = 20_000): Promise<number> {
  const start = Date.now();
  while (!check()) {
    if (Date.now() - start > timeoutMs) assert.fail(`timed out waiting for: ${what}`);
    await sleep(20);
  }
  return Date.now() - start;
}

interface Candidate {
  elector: LeaderElector;
  stop(): Promise<void>;
  leading: AbortSignal | undefined;
  started: number;
  stopped: number;
}

/** Every candidate a test started: stopped after it, pass or fail, so no loop outlives its test. */
const started: Candidate[] = [];

function candidate(client: KubeClient, options: Omit<LeaderElectorOptions, keyof typeof TIMING> & Partial<LeaderElectorOptions>): Candidate {
  const elector = new LeaderElector(client, { ...TIMING, ...options });
  const abort = new AbortController();
  const c: Candidate = {
    elector,
    leading: undefined,
    started: 0,
    stopped: 0,
    async stop() {
      abort.abort();
      await running;
    },
  };
  const running = elector.run(abort.signal, {
    onStartedLeading: (leading) => {
      c.leading = leading;
      c.started++;
    },
    onStoppedLeading: () => {
      c.stopped++;
    },
  });
  started.push(c);
  return c;
}

describe('LeaderElector on a real kube-apiserver', { timeout: 120_000 }, () => {
  const kube = useSharedKube(NS);
  afterEach(async () => {
    for (const c of started.splice(0)) await c.stop();
  });

  test('one of two leads; killed without release, the other leads within leaseDuration + 2 retry periods (and not before); a clean stop hands over at once', async () => {
    const lease = { namespace: NS, name: 'handover' };
    // a is "killed": it stops without giving the lease up.
    const a = candidate(kube.client, { ...lease, identity: 'a', releaseOnCancel: false });
    await until('a leads', () => a.elector.isLeader());
    const b = candidate(kube.client, { ...lease, identity: 'b' });
    await sleep(TIMING.leaseDurationMs + 500);
    assert.equal(b.elector.isLeader(), false, 'b waits while a renews');
    assert.equal(a.elector.isLeader(), true);
    const held = await kube.client.get<Lease>(LEASES, NS, 'handover');
    assert.equal(held?.spec?.holderIdentity, 'a');
    assert.equal(held?.spec?.leaseDurationSeconds, 3);
    assert.equal(held?.spec?.leaseTransitions, 0);
    assert.notEqual(held?.spec?.renewTime, held?.spec?.acquireTime, 'a renewed');

    const killedAt = Date.now();
    await a.stop();
    assert.equal(a.leading?.aborted, true, "a's leading signal aborts");
    assert.equal(a.stopped, 1);
    assert.equal((await kube.client.get<Lease>(LEASES, NS, 'handover'))?.spec?.holderIdentity, 'a', 'not released');
    await until('b leads', () => b.elector.isLeader());
    const takeover = Date.now() - killedAt;
    // b saw a's last renewal at most a retry period late; it then waits a lease duration.
    assert.ok(takeover >= TIMING.leaseDurationMs - TIMING.retryPeriodMs - 100, `b took over after ${takeover} ms: too early`);
    assert.ok(takeover <= TIMING.leaseDurationMs + 2 * TIMING.retryPeriodMs + 500, `b took over after ${takeover} ms: too late`);
    const taken = await kube.client.get<Lease>(LEASES, NS, 'handover');
    assert.equal(taken?.spec?.holderIdentity, 'b');
    assert.equal(taken?.spec?.leaseTransitions, 1);

    const c = candidate(kube.client, { ...lease, identity: 'c' });
    await sleep(500);
    assert.equal(c.elector.isLeader(), false);
    const releasedAt = Date.now();
    await b.stop();
    await until('c leads', () => c.elector.isLeader());
    const handover = Date.now() - releasedAt;
    assert.ok(handover < TIMING.retryPeriodMs * 2 + 500, `a released lease is taken at the next retry, not after a lease duration (${handover} ms)`);
    assert.equal((await kube.client.get<Lease>(LEASES, NS, 'handover'))?.spec?.leaseTransitions, 2);
    await c.stop();
    assert.equal((await kube.client.get<Lease>(LEASES, NS, 'handover'))?.spec?.holderIdentity, '', 'released on a clean stop');
  });

  test('a leader cut off from the API server stops leading within its renew deadline and leads again when it is back', async () => {
    const proxy = await startTcpProxy(new URL(kube.cp.server));
    const cutOff = createKubeClient({ ...adminConfig(kube.cp), server: `https://127.0.0.1:${proxy.port}` }, { timeoutMs: 5000 });
    const a = candidate(cutOff, { namespace: NS, name: 'partition', identity: 'a' });
    try {
      await until('a leads', () => a.elector.isLeader());
      const cutAt = Date.now();
      await proxy.close();
      await until('a stops leading', () => !a.elector.isLeader());
      const lost = Date.now() - cutAt;
      assert.ok(lost <= TIMING.renewDeadlineMs + TIMING.retryPeriodMs + 300, `stopped leading after ${lost} ms`);
      assert.ok(lost < TIMING.leaseDurationMs, 'before anyone else may take over');
      assert.equal(a.leading?.aborted, true);
      await proxy.open();
      await until('a leads again', () => a.elector.isLeader());
      assert.equal(a.started, 2);
    } finally {
      await a.stop();
      cutOff.close();
      await proxy.close();
    }
  });
});
