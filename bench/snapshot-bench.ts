/**
 * `make bench` (SQL snapshot part): the numbers behind ADR 0010 (SQL snapshots through the SSH
 * connection, one kept session per instance), side by side in one run, against one local
 * OpenSSH sshd (collector/test/helpers/sshd.ts, stream-local forwarding allowed) and one
 * PostgreSQL 15 listening on its Unix socket only (collector/test/helpers/pg-cluster.ts,
 * max_connections raised for part 3).
 *
 *   node bench/snapshot-bench.ts [--snapshots 200] [--out FILE.md]
 *
 * Every snapshot is the collector's activity snapshot with `activity` and `locks` on: SqlSession
 * (collector/src/sampler/sql-session.ts) runs BEGIN READ ONLY, the one activity statement
 * (snapshot/activity-sql.ts), its mapping (activityFromRows) and COMMIT. While it runs, the
 * server has background sessions open (opened directly on the socket, not measured): a
 * blocking chain of four (A holds t1; B holds t2 and waits for t1; C waits for t2; D waits for
 * t1 behind A and B) and idle ones up to the level.
 *
 * 1. Kept session against a new session per snapshot, 10 background sessions, through the
 *    in-process ssh2 `direct-streamlocal` channel: (a) one SqlSession kept for all snapshots;
 *    (b) a new SqlSession per snapshot (channel open, startup, authentication, readServerInfo,
 *    the snapshot), closed after it. Latency is from the call to the result (b's close is not
 *    in it); CPU counts everything, close included.
 * 2. Transports, same kept-session snapshot: the in-process ssh2 channel against the real
 *    `pglog sshproxy` sidecar's OpenSSH forward (`ssh -O forward` on its ControlMaster; pg on
 *    the local Unix socket it binds), as collect-sql.test.ts and sshproxy-forwards.test.ts run it.
 *    For reference, the same kept session on the server's socket without SSH (as if the collector
 *    ran on the database host).
 * 3. Scale: the kept ssh2 session with 10, 100 and 400 background sessions, interleaved with the
 *    socket without SSH, to tell the statement's own cost from the transport's.
 *
 * The variants of one table run in blocks A B … B A of --snapshots / 2 each (so all see the
 * same machine), after warm-up snapshots. Collector CPU: process.cpuUsage() over the blocks (this
 * process is the collector: ssh2, pg, the mapping). Server CPU: /proc of the postmaster's tree
 * (its reaped backends included) and the sshd listener's tree. Sidecar CPU: /proc of the
 * sidecar's tree (node and its ssh master). Delayed ACKs: the kernel's TcpExt DelayedACKs
 * (/proc/net/netstat, machine-wide) per snapshot, with the share of snapshots over STALL_MS: through
 * SSH a response often ends waiting for one (the section's text says why).
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { cpus, release, tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Duplex } from 'node:stream';
import { parseArgs } from 'node:util';

import { SqlSession } from '@pglog/collector/sampler/sql-session.ts';
import { activityFromRows } from '@pglog/collector/snapshot/activity-query.ts';
import { activitySql } from '@pglog/collector/snapshot/activity-sql.ts';
import type { Row } from '@pglog/collector/snapshot/pg-values.ts';
import { readServerInfo, type ServerInfo } from '@pglog/collector/snapshot/server-info.ts';
import { SidecarClient } from '@pglog/collector/transport/sidecar-client.ts';
import { SshConnection } from '@pglog/collector/transport/ssh-connection.ts';
import { type Cluster, startCluster } from '@pglog/test-support/pg-cluster.ts';
import { cmdline, descendants } from '@pglog/test-support/process-tree.ts';
import { launchSidecar, sidecarServer } from '@pglog/test-support/sidecar-process.ts';
import { sshConnectionOptions } from '@pglog/test-support/ssh-connection.ts';
import { startSshServer } from '@pglog/test-support/sshd.ts';
import pg from 'pg';

import { createCleanup } from './lib/cleanup.ts';
import { emitReport } from './lib/emit-report.ts';
import { measure, type Shape, STALL_MS, type Variant, type VariantResult } from './snapshot/measure.ts';
import { sshdListenerPid } from './snapshot/proc.ts';

const LEVELS = [10, 100, 400] as const;
const MAX_CONNECTIONS = 450;
const WARMUP = 10;
const TIMEOUT_MS = 10_000;
const BACKGROUND_APP = 'snapshot-bench-background';
const { values } = parseArgs({
  options: {
    snapshots: { type: 'string', default: '200' },
    out: { type: 'string' },
  },
});
const snapshots = Math.max(4, Math.floor(Number(values.snapshots)));
if (!Number.isFinite(snapshots)) throw new Error('--snapshots: a number of snapshots');
const half = Math.ceil(snapshots / 2);

const say = (line: string): void => {
  process.stderr.write(`${line}\n`);
};
const cleanup = createCleanup(say);

/** Connects to a local Unix socket (the sidecar's forward), as the collector's SqlSnapshotSource does. */
function connectUnix(path: string, signal: AbortSignal): Promise<Duplex> {
  return new Promise<Duplex>((resolve, reject) => {
    if (signal.aborted) {
      reject(signal.reason as Error);
      return;
    }
    const socket = connect(path);
    socket.once('connect', () => {
      socket.removeAllListeners('error');
      resolve(socket);
    });
    socket.once('error', reject);
  });
}

/** The collector's activity snapshot (readActivity's body, keeping the row count). */
async function activitySnapshot(session: SqlSession, info: () => ServerInfo): Promise<Shape> {
  return session.readOnly('activity snapshot', async (client) => {
    const result = await client.query<Row>(activitySql(info().versionNum, { sessions: true, locks: true }));
    const mapped = activityFromRows(result.rows);
    return { rows: result.rows.length, sessions: mapped.sessions.length, edges: mapped.blocking.length };
  });
}

/** A SqlSession like SqlSnapshotSource's: ServerInfo read once per new session. */
function newSession(place: string, open: (signal: AbortSignal) => Promise<Duplex>): { session: SqlSession; snapshot: () => Promise<Shape> } {
  let info: ServerInfo | null = null;
  const session = new SqlSession({
    place,
    user: 'postgres',
    database: 'postgres',
    timeoutMs: TIMEOUT_MS,
    open,
    prepare: async (client) => {
      info = await readServerInfo(client);
    },
  });
  return { session, snapshot: () => activitySnapshot(session, () => info!) };
}

/** Background sessions on the server: the blocking chain first, then idle ones; grows to a level. */
class Background {
  private readonly cluster: Cluster;
  private readonly clients: pg.Client[] = [];
  private readonly pending: Promise<unknown>[] = [];

  constructor(cluster: Cluster) {
    this.cluster = cluster;
  }

  get count(): number {
    return this.clients.length;
  }

  private async client(): Promise<pg.Client> {
    const c = new pg.Client({
      host: this.cluster.socketDir,
      port: this.cluster.port,
      user: 'postgres',
      database: 'postgres',
      application_name: BACKGROUND_APP,
    });
    c.on('error', () => undefined); // terminated at clean-up
    await c.connect();
    this.clients.push(c);
    return c;
  }

  /** A holds t1; B holds t2 and waits for t1; C waits for t2; D waits for t1 (behind A and B). */
  async chain(admin: pg.Client): Promise<void> {
    await admin.query('CREATE TABLE IF NOT EXISTS t1 (id int); CREATE TABLE IF NOT EXISTS t2 (id int)');
    const [a, b, c, d] = [await this.client(), await this.client(), await this.client(), await this.client()];
    await a.query('BEGIN; LOCK TABLE t1 IN ACCESS EXCLUSIVE MODE');
    await b.query('BEGIN; LOCK TABLE t2 IN ACCESS EXCLUSIVE MODE');
    const waiting = (q: Promise<unknown>): void => {
      this.pending.push(q.catch(() => undefined));
    };
    waiting(b.query('LOCK TABLE t1 IN ACCESS EXCLUSIVE MODE'));
    waiting(c.query('SELECT count(*) FROM t2'));
    waiting(d.query('SELECT count(*) FROM t1'));
    const deadline = Date.now() + 10_000;
    for (;;) {
      const n = Number(
        (
          await admin.query<{ n: string }>(
            `SELECT count(*) AS n FROM pg_stat_activity WHERE application_name = '${BACKGROUND_APP}' AND wait_event_type = 'Lock'`,
          )
        ).rows[0]!.n,
      );
      if (n === 3) break;
      if (Date.now() > deadline) throw new Error(`the blocking chain: ${n} of 3 sessions waiting after 10 s`);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }

  async growTo(level: number): Promise<void> {
    while (this.clients.length < level) {
      const batch = Array.from({ length: Math.min(20, level - this.clients.length) }, () => this.client());
      await Promise.all(batch);
    }
  }

  async close(admin: pg.Client): Promise<void> {
    await admin.query(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = '${BACKGROUND_APP}'`);
    await Promise.all(this.clients.map((c) => Promise.race([c.end().catch(() => undefined), new Promise((resolve) => setTimeout(resolve, 2000).unref())])));
    await Promise.all(this.pending);
  }
}

const fmt = (x: number, digits = 2): string => (Number.isFinite(x) ? x.toFixed(digits) : '—');
const ratio = (b: number, a: number): string => (a > 0 && Number.isFinite(a) && Number.isFinite(b) ? `${(b / a).toFixed(1)}×` : '—');

async function main(): Promise<void> {
  const started = performance.now();
  const [ssh, cluster] = await Promise.all([
    startSshServer({ allowLocalForwarding: true }),
    startCluster({ dirPrefix: 'pglog-snapbench-', settings: [`max_connections = ${MAX_CONNECTIONS}`] }),
  ]);
  cleanup.push(() => ssh.dispose());
  cleanup.push(() => cluster.dispose());
  const postmasterPid = Number(readFileSync(join(cluster.dataDir, 'postmaster.pid'), 'utf8').split('\n')[0]);
  const sshdPid = sshdListenerPid(ssh);
  const serverPids = (): number[] => [...descendants(postmasterPid), ...descendants(sshdPid)];
  const remoteSocket = `${cluster.socketDir}/.s.PGSQL.${cluster.port}`;

  const admin = new pg.Client({ host: cluster.socketDir, port: cluster.port, user: 'postgres', database: 'postgres' });
  await admin.connect();
  cleanup.push(async () => {
    await admin.end().catch(() => undefined);
  });
  const background = new Background(cluster);
  cleanup.push(() => background.close(admin));
  await background.chain(admin);
  await background.growTo(LEVELS[0]);

  const connection = new SshConnection(sshConnectionOptions(ssh, { target: 'bench' }));
  cleanup.push(() => connection.close());
  const viaSsh2 = (signal: AbortSignal): Promise<Duplex> => connection.openStreamLocal(remoteSocket, { signal });

  const kept = newSession(`bench/main (${remoteSocket} via ssh2)`, viaSsh2);
  cleanup.push(() => kept.session.close());
  const keptVariant: Variant = { name: 'kept session, ssh2 channel', run: async () => ({ shape: await kept.snapshot(), done: Promise.resolve() }) };
  const freshVariant: Variant = {
    name: 'new session per snapshot, ssh2 channel',
    run: async () => {
      const fresh = newSession(`bench/main (${remoteSocket} via ssh2, new)`, viaSsh2);
      try {
        return { shape: await fresh.snapshot(), done: fresh.session.close() };
      } catch (e) {
        await fresh.session.close();
        throw e;
      }
    },
  };

  // The sidecar with one server and one SQL forward, as the collector sets it up.
  const dir = mkdtempSync(join(tmpdir(), 'snb-'));
  cleanup.push(() => rmSync(dir, { recursive: true, force: true }));
  const sidecarClient = await SidecarClient.open({ dir, pollMs: 50, forwardTimeoutMs: 30_000 });
  cleanup.push(() => sidecarClient.close());
  await sidecarClient.setServer(sidecarServer(ssh, 'db', { serverAliveIntervalS: 5, connectTimeoutS: 10 }));
  const sidecar = launchSidecar(dir, ['--log-level', 'warn'], 4000);
  cleanup.push(async () => {
    const tree = descendants(sidecar.proc.pid!);
    sidecar.proc.kill('SIGTERM');
    await Promise.race([sidecar.exited, new Promise((resolve) => setTimeout(resolve, 10_000).unref())]);
    for (const pid of tree) {
      // Only what this sidecar started, and only if it is still that process.
      if (cmdline(pid).some((a) => a.includes(dir))) {
        try {
          process.kill(pid, 'SIGKILL');
        } catch {
          /* gone */
        }
      }
    }
  });
  let localDir: string;
  try {
    localDir = await sidecarClient.forward('db', remoteSocket, cluster.port);
  } catch (e) {
    throw new Error(`the sidecar's forward: ${(e as Error).message}\nsidecar output:\n${sidecar.output()}`, { cause: e });
  }
  const viaSidecar = (signal: AbortSignal): Promise<Duplex> => connectUnix(join(localDir, `.s.PGSQL.${cluster.port}`), signal);
  const proxied = newSession(`bench/main (${remoteSocket} via the sidecar)`, viaSidecar);
  cleanup.push(() => proxied.session.close());
  const proxiedVariant: Variant = {
    name: 'kept session, sidecar OpenSSH forward',
    run: async () => ({ shape: await proxied.snapshot(), done: Promise.resolve() }),
    sidecarPids: () => descendants(sidecar.proc.pid!),
  };
  // Reference without SSH: the same session on the server's socket directly (a collector on the database host).
  const direct = newSession(`bench/main (${remoteSocket} directly)`, (signal) => connectUnix(remoteSocket, signal));
  cleanup.push(() => direct.session.close());
  const directVariant: Variant = {
    name: 'kept session, local socket (no SSH)',
    run: async () => ({ shape: await direct.snapshot(), done: Promise.resolve() }),
  };
  say(`set up in ${((performance.now() - started) / 1000).toFixed(1)} s; ${snapshots} snapshots per variant, in blocks of ${half}`);

  // 1. Kept against new per snapshot.
  const [keptR, freshR] = (await measure([keptVariant, freshVariant], serverPids, half, WARMUP, say)) as [VariantResult, VariantResult];
  // 2. ssh2 channel against the sidecar's forward, and the socket without SSH.
  const [ssh2R, proxyR, directR] = (await measure([keptVariant, proxiedVariant, directVariant], serverPids, half, WARMUP, say)) as [
    VariantResult,
    VariantResult,
    VariantResult,
  ];
  // 3. Scale.
  const scale: { level: number; ssh2: VariantResult; direct: VariantResult }[] = [];
  for (const level of LEVELS) {
    await background.growTo(level);
    const [s, d] = (await measure(
      [
        { ...keptVariant, name: `kept session, ssh2, ${level} sessions` },
        { ...directVariant, name: `kept session, no SSH, ${level} sessions` },
      ],
      serverPids,
      half,
      WARMUP,
      say,
    )) as [VariantResult, VariantResult];
    scale.push({ level, ssh2: s, direct: d });
  }
  const seconds = (performance.now() - started) / 1000;

  const version = (await admin.query<{ server_version: string }>('SHOW server_version')).rows[0]!.server_version;
  const sshVersion = spawnSync('ssh', ['-V'], { encoding: 'utf8' }).stderr.trim();
  const n = 2 * half;
  const lat = (r: VariantResult): string => `${fmt(r.latency.p50)} | ${fmt(r.latency.p99)} | ${fmt(r.latency.max)} | ${(r.latency.stalled * 100).toFixed(1)} %`;
  const latRatio = (b: VariantResult, a: VariantResult): string =>
    `${ratio(b.latency.p50, a.latency.p50)} | ${ratio(b.latency.p99, a.latency.p99)} | ${ratio(b.latency.max, a.latency.max)} |`;
  const cpu = (r: VariantResult): string => `${fmt(r.collectorCpuMs, 3)} | ${fmt(r.serverCpuMs, 2)}`;
  const cpuRatio = (b: VariantResult, a: VariantResult): string => `${ratio(b.collectorCpuMs, a.collectorCpuMs)} | ${ratio(b.serverCpuMs, a.serverCpuMs)}`;
  const acks = (r: VariantResult): string => fmt(r.delayedAcks, 2);
  const last = scale.at(-1)!;
  const first = scale[0]!;
  const text = [
    '## SQL snapshots: kept session, transports, scale (bench/snapshot-bench.ts)',
    '',
    "The collector's activity snapshot with activity and locks on (BEGIN READ ONLY, the one activity statement, mapping its rows, COMMIT; SqlSession from collector/src/sampler/sql-session.ts) " +
      `against one local OpenSSH sshd and one PostgreSQL ${version} listening on its Unix socket only (max_connections ${MAX_CONNECTIONS}). On the server meanwhile: background sessions opened directly on the socket, ` +
      'among them a blocking chain of four (A holds t1; B holds t2 and waits for t1; C waits for t2; D waits for t1 behind A and B: 4 blocking edges), the others idle. ' +
      `${n} measured snapshots per variant after ${WARMUP} warm-up ones, one at a time; the variants compared in one table run in blocks A B … B A of ${half}. Latency: from the call to the mapped result, in ms; "> ${STALL_MS} ms": the share of snapshots that took longer. ` +
      'CPU per snapshot, in ms: collector = process.cpuUsage() of the benchmark process (ssh2, pg, the mapping); server = /proc of the postmaster and sshd trees (reaped backends included; 10 ms ticks, so small values are coarse); ' +
      "sidecar = the `pglog sshproxy` process and its ssh master. Delayed ACKs: the kernel's TcpExt DelayedACKs counter (machine-wide) per snapshot. " +
      `Everything shares the machine: ${cpus().length} × ${cpus()[0]?.model ?? 'unknown'}, Linux ${release()}, Node ${process.version}, ${sshVersion}. Measured ${new Date().toISOString().slice(0, 10)}, ${seconds.toFixed(0)} s in all.`,
    '',
    `**Kept session against a new one per snapshot** (ADR 0010), through the ssh2 \`direct-streamlocal\` channel, ${LEVELS[0]} background sessions. The new session is a channel open, startup, authentication and readServerInfo before the snapshot, and is closed after it (the close counts in CPU, not in latency):`,
    '',
    `| session | p50 | p99 | max | > ${STALL_MS} ms | collector CPU | server CPU | delayed ACKs |`,
    '|---|---:|---:|---:|---:|---:|---:|---:|',
    `| one kept SqlSession | ${lat(keptR)} | ${cpu(keptR)} | ${acks(keptR)} |`,
    `| new SqlSession per snapshot | ${lat(freshR)} | ${cpu(freshR)} | ${acks(freshR)} |`,
    `| *new / kept* | ${latRatio(freshR, keptR)} | ${cpuRatio(freshR, keptR)} | |`,
    '',
    `**Transports**, the same kept-session snapshot, ${LEVELS[0]} background sessions: the in-process ssh2 channel, the real sidecar's OpenSSH stream-local forward (\`pglog sshproxy\`, \`ssh -O forward\` on its ControlMaster; pg on the local socket the master binds), and for reference the server's socket without SSH (as if the collector ran on the database host):`,
    '',
    `| transport | p50 | p99 | max | > ${STALL_MS} ms | collector CPU | server CPU | sidecar CPU | delayed ACKs |`,
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|',
    `| ssh2 channel (inproc) | ${lat(ssh2R)} | ${cpu(ssh2R)} | | ${acks(ssh2R)} |`,
    `| sidecar forward (proxy) | ${lat(proxyR)} | ${cpu(proxyR)} | ${fmt(proxyR.sidecarCpuMs)} | ${acks(proxyR)} |`,
    `| local socket, no SSH | ${lat(directR)} | ${cpu(directR)} | | ${acks(directR)} |`,
    `| *proxy / inproc* | ${latRatio(proxyR, ssh2R)} | ${cpuRatio(proxyR, ssh2R)} | | |`,
    `| *inproc / no SSH* | ${latRatio(ssh2R, directR)} | ${cpuRatio(ssh2R, directR)} | | |`,
    '',
    '**Scale of the activity statement**: the kept ssh2 session (and the socket without SSH for reference, run interleaved) with more sessions on the server. ' +
      "Rows: what the statement returns, one per session and blocker; sessions and edges: after mapping (the background sessions and the benchmark's other kept sessions).",
    '',
    `| background sessions | transport | p50 | p99 | max | > ${STALL_MS} ms | collector CPU | server CPU | delayed ACKs | rows | sessions | edges |`,
    '|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
    ...scale.flatMap(({ level, ssh2, direct: d }) => [
      `| ${level} | ssh2 channel | ${lat(ssh2)} | ${cpu(ssh2)} | ${acks(ssh2)} | ${ssh2.shape.rows} | ${ssh2.shape.sessions} | ${ssh2.shape.edges} |`,
      `| ${level} | no SSH | ${lat(d)} | ${cpu(d)} | ${acks(d)} | ${d.shape.rows} | ${d.shape.sessions} | ${d.shape.edges} |`,
    ]),
    `| *${last.level} / ${first.level}* | ssh2 channel | ${latRatio(last.ssh2, first.ssh2)} | ${cpuRatio(last.ssh2, first.ssh2)} | | | | |`,
    `| *${last.level} / ${first.level}* | no SSH | ${latRatio(last.direct, first.direct)} | ${cpuRatio(last.direct, first.direct)} | | | | |`,
    '',
    `A kept session answers in ${fmt(keptR.latency.p50)} ms (median) against ${fmt(freshR.latency.p50)} ms for a new session per snapshot (${ratio(freshR.latency.p50, keptR.latency.p50)}), ` +
      `and a new session costs the collector ${ratio(freshR.collectorCpuMs, keptR.collectorCpuMs)} and the server ${ratio(freshR.serverCpuMs, keptR.serverCpuMs)} the CPU of a kept one (a backend fork, startup and authentication every time): the numbers behind ADR 0010's kept session. ` +
      `Much of that median is the wait described below; without the snapshots that waited over ${STALL_MS} ms, the medians are ${fmt(keptR.latency.p50Unstalled)} and ${fmt(freshR.latency.p50Unstalled)} ms (${ratio(freshR.latency.p50Unstalled, keptR.latency.p50Unstalled)}). ` +
      `The sidecar's forward is as fast as the ssh2 channel (p50 ${fmt(proxyR.latency.p50)} against ${fmt(ssh2R.latency.p50)} ms). ` +
      `The one statement stays cheap as sessions grow: on the socket without SSH its median goes from ${fmt(first.direct.latency.p50)} to ${fmt(last.direct.latency.p50)} ms from ${first.level} to ${last.level} sessions ` +
      `(${first.direct.shape.rows} to ${last.direct.shape.rows} rows), at ${fmt(last.ssh2.collectorCpuMs)} ms of collector CPU per snapshot through ssh2. ` +
      `Through SSH, though, a result of more than a few kB often waits once for a delayed ACK: ${(scale[1]!.ssh2.latency.stalled * 100).toFixed(0)} % of snapshots took over ${STALL_MS} ms at ${scale[1]!.level} sessions ` +
      `(${fmt(scale[1]!.ssh2.delayedAcks)} delayed ACKs per snapshot, about none without SSH), and so did ${(freshR.latency.stalled * 100).toFixed(0)} % of the new sessions. ` +
      "sshd sets TCP_NODELAY only for interactive sessions, and a connection that only forwards has none (strace of this benchmark's sshd: SO_KEEPALIVE on its connections, never TCP_NODELAY), " +
      "so the tail of a response waits in Nagle's algorithm for the ACK of the segment before it, which the collector's kernel delays by its 40 ms minimum; " +
      "the sidecar's OpenSSH client does set TCP_NODELAY and stalls the same, so the server's side alone is enough for it. " +
      'Measured on loopback (64 KiB segments); on a real network, with smaller segments, how often a response ends in such a wait was not measured.',
    '',
  ].join('\n');
  emitReport(text, values.out);
}

try {
  await main();
} finally {
  await cleanup.run();
}
