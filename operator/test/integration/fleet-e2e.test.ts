// A fleet behind the real operator and collectors on the real node, CI-sized (issue 46; `make
// fleet` runs the same scenario at any size and measures it: bench/fleet-node.ts). The real node
// of e2e-cluster.ts runs the built image (PGLOG_TEST_IMAGE); helpers/fleet-node/ starts, side by
// side with it, FLEET_SERVERS simulated PostgreSQL servers (test-support/src/fleet-sim/: a real
// sshd each on 10.97.x.y, a range made local on the host, log-normal log rates with numbered
// markers, rotation) and REAL_SERVERS real PostgreSQL servers behind sshd of the same fleet with
// SQL snapshots, a store on the node's gateway, one SSH Secret for the whole fleet and a
// PostgresTarget per server (created in bulk before the install); then `helm install` of the
// chart with the HPA on the collectors' event-loop delay (a custom metrics API fed with each
// pod's own value; bounds 2..2 here: the pool's size must hold still for the kill below) and
// the pool patched to promote the hottest few percent of the servers to the sidecar.
//   - every simulated server streams: its first marker written after the install is stored;
//   - a collector pod crashes (its collector and sidecar SIGKILLed through containerd): every
//     server of its shard streams again;
//   - writing stopped: every marker of every server is in the store exactly once and every
//     server's statement rows number the entries written; the real servers' statements are
//     stored once and their snapshots ran; sshd refused no handshake (MaxStartups); no
//     container restarted but the killed pod's, none OOM-killed; no collector logged an error;
//     the store password is in no container's output.
// Timings are printed, not asserted (only generous timeouts): they are the benchmark's to judge.
import assert from 'node:assert/strict';
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';

import { eventually } from '@pglog/test-support/fleet.ts';

import { type FleetNode, NAMESPACE, startFleetNode } from '../helpers/fleet-node/fleet-node.ts';
import { finalCheck, holdings, killAndRecover, untilStreaming } from '../helpers/fleet-node/measure.ts';
import { POOL } from '../helpers/fleet-node/objects.ts';
import { collectorRecords, isReady, operatorCounters, problemCounts, tuningRestarts } from '../helpers/fleet-node/observe.ts';
import { untilRealStreaming } from '../helpers/fleet-node/real-postgres.ts';

const FLEET_SERVERS = 100;
const REAL_SERVERS = 2;
const REPLICAS = 2;

describe(
  `a fleet of ${FLEET_SERVERS} simulated and ${REAL_SERVERS} real servers on the real node: every target streaming, a collector pod crashed and recovered, every marker once`,
  { timeout: 900_000 },
  () => {
    let node: FleetNode;
    let dir = '';
    let installedAt = 0;
    let killedPod = '';
    const started = Date.now();
    const elapsed = (): string => `${((Date.now() - started) / 1000).toFixed(1)} s`;
    const say = (line: string): void => console.log(`# ${line} (at ${elapsed()})`);
    const scenario = (fn: () => Promise<void>) => async (): Promise<void> => {
      try {
        await fn();
      } catch (e) {
        const pods = await node?.cluster.kubectl(['get', 'pods', '-o', 'wide']).catch(() => '');
        process.stderr.write(
          `# failed at ${elapsed()}\n--- pods\n${pods}\n--- pods' output (last lines)\n${node?.cluster.node.podLogs.all(NAMESPACE).slice(-80).join('\n') ?? ''}\n`,
        );
        throw e;
      }
    };

    before(async () => {
      dir = mkdtempSync(join(tmpdir(), 'pglog-fleet-e2e-'));
      // The servers' login user reads the fleet's files below it.
      chmodSync(dir, 0o755);
      node = await startFleetNode({
        servers: FLEET_SERVERS,
        realPostgres: REAL_SERVERS,
        replicas: REPLICAS,
        hpa: { min: REPLICAS, max: REPLICAS, targetSeconds: 0.5 },
        image: process.env['PGLOG_TEST_IMAGE'],
        docker: process.env['PGLOG_TEST_DOCKER'] ?? 'docker',
        keyCache: join(process.env['PGLOG_CACHE'] ?? join(homedir(), '.cache/pglog'), 'fleet-node-keys'),
        dir: join(dir, 'fleet'),
        say,
      });
      installedAt = await node.install();
      say(`helm install and the pool's patch done in ${((Date.now() - installedAt) / 1000).toFixed(1)} s (collector memory limit ${node.memoryLimitMiB} MiB)`);
    });

    after(async () => {
      await node?.dispose();
      if (dir !== '') rmSync(dir, { recursive: true, force: true });
    });

    test(
      'every server streams after helm install: its first marker (a real server: its first statement) written after the install is stored',
      scenario(async () => {
        const [t, real] = await Promise.all([untilStreaming(node, installedAt, 480_000), untilRealStreaming(node.storePool, node.real, installedAt, 480_000)]);
        assert.deepEqual(
          [...real].filter(([, s]) => s === null),
          [],
          'real servers not streaming',
        );
        assert.deepEqual(t.missing, [], `servers not streaming ${((Date.now() - installedAt) / 1000).toFixed(0)} s after helm install`);
        const h = await holdings(node);
        assert.equal(h.pods.length, REPLICAS, `the pool's pods: ${h.pods.map((p) => p.pod).join(', ')}`);
        // Readiness (its targets collecting) is probed every few seconds: it may trail the first rows.
        await eventually('every collector pod Ready', 120_000, async () => ((await node.pods()).every(isReady) ? true : undefined));
        say(
          `every server streaming ${t.all!.toFixed(1)} s after helm install (half at ${t.half!.toFixed(1)} s), the real ones at ${[...real.values()].map((s) => s!.toFixed(1)).join(', ')} s; ` +
            `per pod SSH/store connections: ${h.pods.map((p) => `${p.pod} ${p.sshConnections}/${p.storeConnections}`).join(', ')}; store connections in all ${h.storeTotal}`,
        );
      }),
    );

    test(
      'a collector pod crashes (collector and sidecar SIGKILLed through containerd): every server of its shard streams again',
      scenario(async () => {
        const pods = await node.pods();
        const pod = pods.find((p) => p.metadata.name === `${POOL}-0`)!;
        killedPod = pod.metadata.name;
        const r = await killAndRecover(node, pod, 300_000);
        assert.ok(r.targets > 0, `${killedPod}'s shard has simulated servers`);
        assert.deepEqual(r.times.missing, [], `servers of ${killedPod} not streaming again`);
        say(`${killedPod} killed: its ${r.targets} servers stream again ${r.times.all!.toFixed(1)} s later (half at ${r.times.half!.toFixed(1)} s)`);
      }),
    );

    test(
      'writing stopped: every marker of every server once, the real servers whole with snapshots, no refused handshake, no other restart, no OOM kill, no collector error',
      scenario(async () => {
        const stoppedAt = Date.now();
        const totals = await node.stopWriting();
        const check = await finalCheck(node, totals, stoppedAt, 300_000);
        say(`store drained ${check.drainedSeconds?.toFixed(1) ?? '-'} s after writing stopped: ${check.line}`);
        for (const r of check.real) say(r.line);
        assert.equal(check.fleet.lostMarkers, 0, check.line);
        assert.equal(check.fleet.duplicatedMarkers, 0, check.line);
        assert.equal(check.fleet.whole, FLEET_SERVERS, check.line);
        for (const r of check.real) {
          assert.equal(r.lost + r.duplicated, 0, r.line);
          assert.ok(r.logged > 0 && r.snapshots > 0, r.line);
        }
        assert.equal(check.refusedHandshakes, 0, 'handshakes refused by sshd (MaxStartups)');
        await node.pods();
        const restarts = node.restarts.restarts();
        assert.equal(node.restarts.oomKills(), 0, `OOM kills: ${restarts.join('; ')}`);
        assert.ok(
          restarts.every((r) => r.startsWith(`${killedPod}/`)),
          `only the killed pod's containers restarted: ${restarts.join('; ')}`,
        );
        const records = collectorRecords(node.cluster.node.podLogs, NAMESPACE, POOL);
        const moves = await operatorCounters(node.cluster.client, NAMESPACE, POOL);
        say(
          `the operator moved targets ${moves.moves} times, promoted ${moves.promotions}, demoted ${moves.demotions}; collector processes restarted for a new tuning: ${tuningRestarts(records)}`,
        );
        const errors = problemCounts(records, 50).filter((p) => !p.line.includes('STORE_FENCED'));
        assert.deepEqual(errors, [], 'no errors logged by the collectors');
        const password = decodeURIComponent(new URL(node.store.tcpUrl!).password);
        assert.deepEqual(
          node.cluster.node.podLogs.all(NAMESPACE).filter((l) => l.includes(password)),
          [],
          "the store password in no container's output",
        );
      }),
    );
  },
);
