// The container image as users run it, not the sources: `make test-image` builds it from the
// Dockerfile (on a local stand-in for the official Node image) and names it in
// PGLOG_TEST_IMAGE; this file runs it with Docker.
//   - `pglog help`, and what is (not) in the image: uid 65532, tini, no compiler, no npm cache,
//     no dev dependencies, ssh2's native binding present;
//   - `pglog collect` in a container locked down like the chart's pods (read-only root, uid
//     65532, every capability dropped, no-new-privileges, only /tmp writable) against a real
//     sshd and a real store on this machine: every logged statement stored exactly once, over
//     ssh2 with its native AES-GCM binding (`nativeCrypto: true`) and over the `pglog sshproxy`
//     sidecar, whose OpenSSH client runs inside the container: as its child, and as the pods run
//     it, in a second container sharing a memory-backed volume.
// Nothing is skipped: without Docker or without the image the tests fail and say why.
import assert from 'node:assert/strict';
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { appendFileSync, chmodSync, chownSync, copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';

import { expectStoredOnce } from '@pglog/test-support/checker.ts';
import { type TargetSpec, waitFor, writeTargetsFile } from '@pglog/test-support/collector-process.ts';
import { type LogServer, startLogServer } from '@pglog/test-support/log-server.ts';
import { startPostgres, type TestPostgres } from '@pglog/test-support/postgres.ts';
import { startSeqLoad } from '@pglog/test-support/seq-load.ts';
import { startSshServer, type TestSshServer } from '@pglog/test-support/sshd.ts';

const IMAGE = process.env['PGLOG_TEST_IMAGE'];
const DOCKER = process.env['PGLOG_TEST_DOCKER'] ?? 'docker';
/** The uid and gid the Dockerfile runs as (and the chart's pods). */
const UID = 65532;
/** Where the container sees its read-only configuration and the store's socket directory. */
const CONFIG_DIR = '/etc/pglog';
const STORE_SOCKET_DIR = '/run/pglog-store';
/** The sidecar's directory in the chart's pods (an emptyDir both containers mount). */
const SSHPROXY_DIR = '/run/pglog/sshproxy';

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

function docker(args: string[]): Promise<Run> {
  return new Promise((resolve) => {
    execFile(DOCKER, args, { maxBuffer: 64 * 1024 * 1024 }, (error, stdout, stderr) => {
      const code = error === null ? 0 : typeof error.code === 'number' ? error.code : 127;
      resolve({ code, stdout, stderr: error !== null && stderr === '' ? error.message : stderr });
    });
  });
}

/** `docker run --rm` of the image with a shell as entrypoint (inspecting what is in it). */
async function shellInImage(script: string): Promise<string> {
  const r = await docker(['run', '--rm', '--network', 'none', '--entrypoint', '/bin/sh', IMAGE!, '-c', script]);
  assert.equal(r.code, 0, `sh -c ${JSON.stringify(script)} in ${IMAGE}: ${r.stderr}`);
  return r.stdout;
}

/** The flags that lock the container down as the chart's pods are: only /tmp (an emptyDir there) is writable. */
const LOCKED_DOWN = ['--read-only', '--user', `${UID}:${UID}`, '--cap-drop', 'ALL', '--security-opt', 'no-new-privileges', '--tmpfs', '/tmp:rw,exec,mode=1777'];

describe('the built image', { timeout: 600_000 }, () => {
  before(async () => {
    if (IMAGE === undefined || IMAGE === '') {
      throw new Error('PGLOG_TEST_IMAGE is not set: these tests run the built image; build it and run them with `make image-test` (or `make test`)');
    }
    const version = await docker(['version', '--format', '{{.Server.Version}}']);
    if (version.code !== 0)
      throw new Error(`Docker cannot run here (\`${DOCKER} version\`: ${version.stderr.trim()}); \`make docker\` installs and starts the engine`);
    const inspect = await docker(['image', 'inspect', IMAGE]);
    if (inspect.code !== 0) throw new Error(`the image ${IMAGE} does not exist (${inspect.stderr.trim()}); \`make test-image\` builds it`);
  });

  test('pglog help runs as uid 65532 under tini', async () => {
    const r = await docker(['run', '--rm', '--network', 'none', ...LOCKED_DOWN, IMAGE!, 'help']);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout + r.stderr, /collect/);
    assert.match(r.stdout + r.stderr, /sshproxy/);
    const config = JSON.parse((await docker(['image', 'inspect', '-f', '{{json .Config}}', IMAGE!])).stdout) as { User: string; Entrypoint: string[] };
    assert.equal(config.User, `${UID}:${UID}`);
    assert.deepEqual(config.Entrypoint, ['/usr/bin/tini', '--', 'pglog']);
  });

  test('locked down, every command reads its modules from the compile cache warmed into the image', async () => {
    for (const args of [['help'], ['collect', '--help'], ['sshproxy', '--help']]) {
      // Node's own account of each module's cache lookup, on stderr; a miss would mean type
      // stripping and compiling at every container start (Dockerfile, docs/benchmarks.md).
      const r = await docker(['run', '--rm', '--network', 'none', ...LOCKED_DOWN, '-e', 'NODE_DEBUG_NATIVE=COMPILE_CACHE', IMAGE!, ...args]);
      assert.equal(r.code, 0, r.stderr);
      const lookups = r.stderr.split('\n').filter((l) => l.includes('transpile cache for StrippedTypeScript'));
      assert.ok(
        lookups.some((l) => l.includes('file:///app/cli/src/main.ts') && l.endsWith('success')),
        `pglog ${args.join(' ')}: main.ts not read from the cache:\n${r.stderr.slice(0, 2000)}`,
      );
      assert.deepEqual(
        lookups.filter((l) => !l.endsWith('success')),
        [],
        `pglog ${args.join(' ')}: modules compiled at start-up`,
      );
    }
  });

  test("no compiler, no npm cache, no dev dependencies; ssh2's native binding and OpenSSH are in", async () => {
    const found = await shellInImage(
      [
        'for c in cc gcc g++ c++ make python3; do command -v $c; done',
        'ls -d /root/.npm /tmp/npm-cache /app/.npm 2>/dev/null',
        'ls -d /app/node_modules/typescript /app/node_modules/eslint /app/node_modules/@types 2>/dev/null',
        // npm's CA bundle was a BuildKit secret of the build, mounted for one RUN only.
        'ls -A /run/secrets 2>/dev/null',
        'true',
      ].join('; '),
    );
    assert.equal(found, '', `the image has build tools, an npm cache, dev dependencies or build secrets:\n${found}`);
    const present = await shellInImage('ls /app/node_modules/ssh2/lib/protocol/crypto/build/Release/sshcrypto.node; command -v ssh; command -v tini');
    assert.deepEqual(present.trim().split('\n'), ['/app/node_modules/ssh2/lib/protocol/crypto/build/Release/sshcrypto.node', '/usr/bin/ssh', '/usr/bin/tini']);
    const sbom = JSON.parse(await shellInImage('cat /app/sbom.cdx.json')) as { bomFormat: string; components: Array<{ name: string }> };
    assert.equal(sbom.bomFormat, 'CycloneDX');
    const names = new Set(sbom.components.map((c) => c.name));
    assert.ok(names.has('ssh2') && names.has('pg'), 'the SBOM lists the runtime packages');
    assert.ok(!names.has('typescript') && !names.has('eslint'), 'the SBOM lists no dev dependencies');
  });

  describe('pglog collect in a locked-down container against a real sshd and store', () => {
    let work: string;
    let store: TestPostgres;
    let ssh: TestSshServer;
    let server: LogServer;
    const containers = new Set<string>();
    const volumes = new Set<string>();

    before(async () => {
      work = mkdtempSync(join(tmpdir(), 'pglog-image-'));
      [store, ssh, server] = await Promise.all([startPostgres(), startSshServer(), startLogServer()]);
      // The container's user reaches the store's socket through the mounted directory; the
      // socket itself is open to all (unix_socket_permissions), the directory needs search.
      chmodSync(store.socketDir, 0o711);
    });

    after(async () => {
      await Promise.allSettled([...containers].map((name) => docker(['rm', '-f', name])));
      await Promise.allSettled([...volumes].map((name) => docker(['volume', 'rm', '-f', name])));
      await Promise.allSettled([ssh?.dispose(), server?.dispose(), store?.stop()]);
      rmSync(work, { recursive: true, force: true });
    });

    interface Container {
      name: string;
      output(): string;
      exited: Promise<number | null>;
    }

    /** `docker run` of the image, locked down, on the host's network (the sshd and the store listen on its loopback only). */
    function runContainer(name: string, dockerArgs: string[], args: string[], env: Record<string, string> = {}): Container {
      containers.add(name);
      const outputFile = join(work, `${name}.log`);
      const child: ChildProcess = spawn(
        DOCKER,
        ['run', '--rm', '--name', name, ...LOCKED_DOWN, '--network', 'host', ...dockerArgs, ...Object.keys(env).flatMap((k) => ['-e', k]), IMAGE!, ...args],
        { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env } },
      );
      const append = (b: Buffer): void => appendFileSync(outputFile, b);
      child.stdout!.on('data', append);
      child.stderr!.on('data', append);
      return {
        name,
        output: () => {
          try {
            return readFileSync(outputFile, 'utf8');
          } catch {
            return '';
          }
        },
        exited: new Promise((resolve) => child.on('close', (code) => resolve(code))),
      };
    }

    /** SIGTERM through `docker stop`: the container must exit 0 (tini forwards it to pglog). */
    async function stopContainer(c: Container): Promise<void> {
      const stopped = await docker(['stop', '--time', '30', c.name]);
      assert.equal(stopped.code, 0, stopped.stderr);
      assert.equal(await c.exited, 0, `${c.name} exits 0 on SIGTERM:\n${c.output().split('\n').slice(-40).join('\n')}`);
      containers.delete(c.name);
    }

    /**
     * Runs `pglog collect` in the image on one target with `transport`, under load, until every
     * statement of the load is stored once; returns the collector container's output. With
     * `pod`, the sidecar runs as the chart's pods run it: `pglog sshproxy` in a container of its
     * own, sharing a memory-backed volume with the collector (`--sshproxy external`).
     */
    async function collectThrough(
      label: string,
      transport: 'inproc' | 'proxy',
      pod: boolean,
      whileRunning: (collector: string, sidecar: string | null) => Promise<void>,
    ): Promise<string> {
      // The configuration the containers read, owned by their user (the key must be 0600).
      const config = join(work, label);
      mkdirSync(config, { mode: 0o700 });
      copyFileSync(ssh.privateKeyFile, join(config, 'id'));
      copyFileSync(ssh.knownHostsFile, join(config, 'known_hosts'));
      chmodSync(join(config, 'id'), 0o600);
      const spec: TargetSpec = {
        name: 'db1',
        host: ssh.host,
        port: ssh.port,
        user: ssh.user,
        transport,
        privateKeyFile: `${CONFIG_DIR}/id`,
        knownHostsFile: `${CONFIG_DIR}/known_hosts`,
        instances: [{ name: 'main', dataDirectory: server.dataDirectory, logDirectory: server.logDirectory }],
      };
      writeTargetsFile(config, [spec]);
      for (const f of ['', 'id', 'known_hosts', 'targets.yaml']) chownSync(join(config, f), UID, UID);
      const mounts = ['-v', `${config}:${CONFIG_DIR}:ro`];

      const prefix = `pglog-image-test-${label}-${process.pid}`;
      let sidecar: Container | null = null;
      const sidecarArgs: string[] = [];
      if (pod) {
        // The pod's emptyDir of medium Memory: a tmpfs volume both containers mount.
        const volume = `${prefix}-sshproxy`;
        volumes.add(volume);
        const created = await docker([
          'volume',
          'create',
          '--driver',
          'local',
          '--opt',
          'type=tmpfs',
          '--opt',
          'device=tmpfs',
          '--opt',
          `o=uid=${UID},gid=${UID},mode=0700`,
          volume,
        ]);
        assert.equal(created.code, 0, created.stderr);
        mounts.push('-v', `${volume}:${SSHPROXY_DIR}`);
        sidecar = runContainer(`${prefix}-sidecar`, mounts, ['sshproxy', '--dir', SSHPROXY_DIR, '--log-level', 'debug']);
        sidecarArgs.push('--sshproxy', 'external', '--sshproxy-dir', SSHPROXY_DIR);
      }
      const storeUrl = `postgresql://postgres@/postgres?host=${encodeURIComponent(STORE_SOCKET_DIR)}&port=${store.port}`;
      const collector = runContainer(
        `${prefix}-collector`,
        [...mounts, '-v', `${store.socketDir}:${STORE_SOCKET_DIR}`],
        ['collect', '--targets', `${CONFIG_DIR}/targets.yaml`, '--listen', 'off', '--log-level', 'debug', '--batch-ms', '200', ...sidecarArgs],
        { PGLOG_STORE_URL: storeUrl },
      );
      const tail = (): string => [collector, sidecar].flatMap((c) => (c === null ? [] : [`${c.name}:`, ...c.output().split('\n').slice(-30)])).join('\n');

      await waitFor(() => collector.output().includes('reading '), `pglog collect (${label}) in the container to start reading`, 120_000, tail);
      const load = startSeqLoad(server.url, { ratePerSecond: 200, payloadBytes: 60 });
      try {
        await whileRunning(collector.name, sidecar?.name ?? null);
        await new Promise((r) => setTimeout(r, 2_000));
      } finally {
        await load.stop();
      }
      console.log(`# ${label}: ${await expectStoredOnce(store.url, `collect in the image (${label})`, load.run, server.logDirectory, 120_000)}`);
      await stopContainer(collector);
      if (sidecar !== null) await stopContainer(sidecar);
      return collector.output();
    }

    /**
     * The `docker top` line of `container`'s PID 1. `docker top` lists host PIDs in
     * ascending order, and host PIDs wrap, so PID 1 is not always the first line.
     */
    async function initLine(container: string, processes: string): Promise<string> {
      const hostPid = (await docker(['inspect', '-f', '{{.State.Pid}}', container])).stdout.trim();
      assert.match(hostPid, /^[1-9]\d*$/, `the host PID of ${container}'s PID 1`);
      return processes.split('\n').find((l) => l.trim().split(/\s+/)[0] === hostPid) ?? `(no process ${hostPid} in docker top)`;
    }

    /** Waits until `container` runs `pglog sshproxy` and an OpenSSH client; returns `docker top`. */
    async function sshInside(container: string): Promise<string> {
      let processes = '';
      await waitFor(
        async () => {
          processes = (await docker(['top', container, '-o', 'pid,user,args'])).stdout;
          return /\bsshproxy\b/.test(processes) && /(?:^|\s|\/)ssh\s/m.test(processes);
        },
        `pglog sshproxy and an ssh client in ${container}`,
        60_000,
        () => processes,
      );
      for (const line of processes
        .split('\n')
        .slice(1)
        .filter((l) => l.trim() !== '')) {
        assert.match(line, new RegExp(`^\\s*\\d+\\s+${UID}\\s`), `every process in the container runs as ${UID}: ${line}`);
      }
      return processes;
    }

    test('over ssh2 with its native AES-GCM binding: every statement stored once', async () => {
      const output = await collectThrough('inproc', 'inproc', false, async () => {});
      const connected = output
        .split('\n')
        .filter((l) => l.includes('"nativeCrypto"'))
        .map((l) => JSON.parse(l) as { nativeCrypto: boolean; cipher: string });
      assert.ok(connected.length > 0, `a connection was logged:\n${output}`);
      assert.ok(
        connected.every((c) => c.nativeCrypto),
        `ssh2 used its native binding: ${JSON.stringify(connected)}`,
      );
    });

    test('over the pglog sshproxy child, whose OpenSSH client runs inside the container', async () => {
      let processes = '';
      let init = '';
      const output = await collectThrough('child', 'proxy', false, async (collector) => {
        processes = await sshInside(collector);
        init = await initLine(collector, processes);
      });
      assert.match(output, /sshproxy sidecar started/);
      assert.match(init, /\/usr\/bin\/tini -- pglog collect/, `tini is PID 1 and reaps the sidecar's ssh processes:\n${processes}`);
    });

    test("as the chart's pods run it: the sshproxy sidecar in its own container, sharing a memory-backed volume", async () => {
      let processes = '';
      let init = '';
      await collectThrough('pod', 'proxy', true, async (_collector, sidecar) => {
        processes = await sshInside(sidecar!);
        init = await initLine(sidecar!, processes);
      });
      assert.match(init, /\/usr\/bin\/tini -- pglog sshproxy/, `tini is the sidecar's PID 1:\n${processes}`);
    });
  });
});
