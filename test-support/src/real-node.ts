// A real Kubernetes node on this machine for the tests: the control plane of control-plane.ts
// (listening on the node's bridge address, so pods reach it through the `kubernetes`
// Service), kube-scheduler, a containerd of its own (beside Docker's, own socket, root and
// state), the CNI bridge of node-config.ts, kubelet and kube-proxy in iptables mode, all built
// or installed by scripts/install-kube-tools.sh. stop() removes what it made: processes, pod
// sandboxes, mounts under its directory, network namespaces, the bridge and the iptables rules.
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

import { ChildGroup } from './child-group.ts';
import { type ControlPlane, kubeBin, runKubectl, startControlPlane } from './control-plane.ts';
import { onProcessExit } from './exit-cleanup.ts';
import { acquireMachineLock } from './machine-lock.ts';
import { cniConflist, containerdConfig, defaultNodeNetwork, kubeletConfig, type NodeNetwork } from './node-config.ts';
import { PodLogKeeper } from './pod-logs.ts';
import { killInCgroup, killMatching } from './process-tree.ts';
import { createTestCa } from './test-ca.ts';
import { freePort, sleep } from './wait.ts';

const run = promisify(execFile);
const repoRoot = join(import.meta.dirname, '../..');
const sandboxImage = 'pglog.local/pause:1';
const nodeName = 'pglog-node';

export interface RealNode {
  readonly cp: ControlPlane;
  readonly nodeName: string;
  /** The bridge, its gateway (the host as the pods see it: servers for the pods listen there) and the ranges. */
  readonly network: NodeNetwork;
  /** Every container's output, kept after its pod is gone. */
  readonly podLogs: PodLogKeeper;
  /** Copies images from Docker (`docker save REF... | ctr images import -`) into the node's containerd. */
  importDockerImage(refs: string | readonly string[], docker?: string): Promise<void>;
  /** The ids of the containerd tasks (running containers and sandboxes) of the node's pods. */
  tasks(): Promise<string[]>;
  /** SIGKILLs a container's process through containerd (a crash: no SIGTERM); `id` as in a pod's containerStatuses, with or without `containerd://`. */
  killContainer(id: string): Promise<void>;
  /** kubectl with its stderr (Pod Security warnings arrive there); rejects on a non-zero exit. */
  kubectlWithWarnings(args: readonly string[], stdin?: string): Promise<{ stdout: string; stderr: string }>;
  /** The control plane's and the node's processes' output (their last lines). */
  logs(): string;
  stop(): Promise<void>;
}

async function sh(cmd: string, args: readonly string[]): Promise<string> {
  return (await run(cmd, [...args], { maxBuffer: 64 * 1024 * 1024 })).stdout;
}

async function quiet(cmd: string, args: readonly string[]): Promise<void> {
  try {
    await sh(cmd, args);
  } catch {
    /* best effort clean-up */
  }
}

/** A CA and a client certificate of it in group system:masters, for the API server → kubelet. */
async function kubeletClientCerts(dir: string): Promise<void> {
  const ca = await createTestCa(dir, '/CN=pglog-kubelet-client-ca', ['-newkey', 'rsa:2048', '-nodes']);
  await ca.issue('client', '/O=system:masters/CN=kube-apiserver');
}

function ourMounts(dir: string): string[] {
  return readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .map((l) => l.split(' ')[4] ?? '')
    .filter((m) => m.startsWith(dir))
    .reverse();
}

export interface RealNodeOptions {
  /** More kube-apiserver flags (the aggregation layer's, for one). */
  readonly apiserverArgs?: readonly string[];
  /** More kube-controller-manager flags (the HPA controller's sync period, for one). */
  readonly controllerManagerArgs?: readonly string[];
}

/** `docker save REF... | ctr images import -`, without a shell (one archive: shared layers are sent once). */
async function pipeImage(refs: readonly string[], docker: string, socket: string): Promise<void> {
  const ref = refs.join(' ');
  const save = spawn(docker, ['save', ...refs], { stdio: ['ignore', 'pipe', 'pipe'] });
  const load = spawn('ctr', ['-a', socket, '-n', 'k8s.io', 'images', 'import', '-'], { stdio: ['pipe', 'pipe', 'pipe'] });
  let err = '';
  save.stderr.on('data', (b: Buffer) => {
    err += b.toString();
  });
  load.stderr.on('data', (b: Buffer) => {
    err += b.toString();
  });
  load.stdout.resume();
  save.stdout.pipe(load.stdin);
  const exit = (c: ChildProcess): Promise<number | null> => new Promise((r) => c.on('close', (code) => r(code)));
  const [saved, loaded] = await Promise.all([exit(save), exit(load)]);
  if (saved !== 0 || loaded !== 0) throw new Error(`importing ${ref}: docker save exit ${saved}, ctr import exit ${loaded}: ${err.trim()}`);
}

function netnsNames(): string[] {
  try {
    return readdirSync('/var/run/netns');
  } catch {
    return [];
  }
}

export async function startRealNode(options: RealNodeOptions = {}): Promise<RealNode> {
  // Test files run side by side wait here for the one before them to stop its node.
  const unlock = await acquireMachineLock('real-node', 30 * 60_000);
  const bin = kubeBin();
  const net = defaultNodeNetwork;
  const dir = mkdtempSync(join(tmpdir(), 'pglog-node-'));
  const netnsBefore = new Set(netnsNames());
  const group = new ChildGroup(dir, 4000);
  const start = (name: string, command: string, args: string[]): ChildProcess => group.start(name, command, args);
  const socket = join(dir, 'containerd.sock');
  const podLogsDir = join(dir, 'pod-logs');
  const podLogs = new PodLogKeeper(podLogsDir, join(dir, 'kept-logs'));
  let cp: ControlPlane | undefined;
  const killAll = (): void => group.killAll();
  const cleanupSync = (): void => {
    killAll();
  };
  const forget = onProcessExit(cleanupSync);

  const stop = async (): Promise<void> => {
    // Pods first, while the kubelet and containerd still run: the CRI tears down their
    // sandboxes (CNI DEL: veths, IP leases) and unmounts their volumes.
    if (cp !== undefined) {
      await quiet(join(bin, 'kubectl'), [
        '--kubeconfig',
        cp.kubeconfig,
        'delete',
        'pods',
        '--all',
        '--all-namespaces',
        '--grace-period=0',
        '--force',
        '--wait=false',
      ]);
      for (let i = 0; i < 60; i++) {
        const tasks = await sh('ctr', ['-a', socket, '-n', 'k8s.io', 'tasks', 'ls', '-q']).catch(() => '');
        if (tasks.trim() === '') break;
        await sleep(500);
      }
    }
    // Any task left (its shim outlives containerd): kill it through containerd.
    const left = (await sh('ctr', ['-a', socket, '-n', 'k8s.io', 'tasks', 'ls', '-q']).catch(() => '')).split('\n').filter(Boolean);
    for (const id of left) await quiet('ctr', ['-a', socket, '-n', 'k8s.io', 'tasks', 'kill', '-s', 'SIGKILL', id]);
    for (const id of left) await quiet('ctr', ['-a', socket, '-n', 'k8s.io', 'tasks', 'delete', '-f', id]);
    podLogs.stop();
    await group.stop();
    // A shim outlives its containerd and exits only when its containers are deleted: those of
    // this node name its socket, which is in the node's own directory (no other shim names it).
    killMatching((args) => (args[0] ?? '').endsWith('containerd-shim-runc-v2') && args.includes(socket));
    // runc freezes a container's cgroup while it kills the container and thaws it afterwards;
    // a CI run was left with a pod's cgroup frozen, and its /pause process, killed but frozen,
    // outlived the node by hours (state D, no signal ends it) and failed the next run's
    // uninstall check. Thawing lets the pending SIGKILL land; it is reported, not hidden.
    const thawed = thawFrozenPodCgroups();
    if (thawed.length > 0) process.stderr.write(`real-node: thawed ${String(thawed.length)} pod cgroup(s) left frozen: ${thawed.join(', ')}\n`);
    // What is left in the node's pod cgroups is the node's (killInCgroup spares a test run that is itself in a pod).
    killInCgroup('/kubepods');
    // kube-proxy removes its own KUBE-* rules.
    await quiet(join(bin, 'kube-proxy'), ['--cleanup', '--proxy-mode=iptables']);
    for (const ns of netnsNames()) if (!netnsBefore.has(ns) && ns.startsWith('cni-')) await quiet('ip', ['netns', 'delete', ns]);
    // The kubelet's own chains (kube-proxy --cleanup leaves them).
    for (const ipt of ['iptables', 'ip6tables']) {
      for (const hook of ['INPUT', 'OUTPUT']) await quiet(ipt, ['-t', 'filter', '-D', hook, '-j', 'KUBE-FIREWALL']);
      for (const table of ['filter', 'nat', 'mangle']) {
        for (const chain of ['KUBE-FIREWALL', 'KUBE-KUBELET-CANARY', 'KUBE-IPTABLES-HINT']) {
          await quiet(ipt, ['-t', table, '-F', chain]);
          await quiet(ipt, ['-t', table, '-X', chain]);
        }
      }
    }
    await quiet('ip', ['link', 'delete', net.bridge]);
    for (const m of ourMounts(dir)) await quiet('umount', ['-l', m]);
    await cp?.stop();
    forget();
    rmSync(dir, { recursive: true, force: true });
    unlock();
  };

  try {
    // The bridge exists before the API server, which listens on its address.
    await quiet('ip', ['link', 'add', net.bridge, 'type', 'bridge']);
    await quiet('ip', ['addr', 'add', `${net.gateway}/24`, 'dev', net.bridge]);
    await sh('ip', ['link', 'set', net.bridge, 'up']);
    await kubeletClientCerts(dir);
    cp = await startControlPlane({
      controllerManager: true,
      bindAddress: net.gateway,
      serviceRange: net.serviceRange,
      apiserverArgs: [
        '--kubelet-preferred-address-types=InternalIP',
        `--kubelet-client-certificate=${join(dir, 'client.crt')}`,
        `--kubelet-client-key=${join(dir, 'client.key')}`,
        ...(options.apiserverArgs ?? []),
      ],
      ...(options.controllerManagerArgs === undefined ? {} : { controllerManagerArgs: options.controllerManagerArgs }),
    });
    const [schedPort, kubeletPort, kubeletHealthz, proxyHealthz, proxyMetrics] = [
      await freePort(),
      await freePort(),
      await freePort(),
      await freePort(),
      await freePort(),
    ];
    start('kube-scheduler', join(bin, 'kube-scheduler'), [
      `--kubeconfig=${cp.kubeconfig}`,
      `--authentication-kubeconfig=${cp.kubeconfig}`,
      `--authorization-kubeconfig=${cp.kubeconfig}`,
      `--secure-port=${schedPort}`,
      '--bind-address=127.0.0.1',
      '--leader-elect=false',
    ]);

    const cniConfDir = join(dir, 'cni');
    mkdirSync(cniConfDir);
    writeFileSync(join(cniConfDir, '10-pglog.conflist'), cniConflist(net));
    writeFileSync(
      join(dir, 'containerd.toml'),
      containerdConfig({
        root: join(dir, 'containerd-root'),
        state: join(dir, 'containerd-state'),
        socket,
        cniConfDir,
        cniBinDir: '/usr/lib/cni',
        sandboxImage,
      }),
    );
    start('containerd', 'containerd', ['--config', join(dir, 'containerd.toml')]);
    for (let i = 0; ; i++) {
      try {
        await sh('ctr', ['-a', socket, 'version']);
        break;
      } catch (e) {
        if (i > 120) throw new Error(`containerd did not start: ${String(e)}\n${group.logs().slice(-4000)}`);
        await sleep(250);
      }
    }
    const pause = (await sh(join(repoRoot, 'scripts/build-pause-image.sh'), [sandboxImage])).trim();
    await sh('ctr', ['-a', socket, '-n', 'k8s.io', 'images', 'import', pause]);

    writeFileSync(
      join(dir, 'kubelet.json'),
      kubeletConfig({ runtimeSocket: socket, clientCaFile: join(dir, 'ca.crt'), port: kubeletPort, healthzPort: kubeletHealthz, net, podLogsDir }),
    );
    start('kubelet', join(bin, 'kubelet'), [
      `--config=${join(dir, 'kubelet.json')}`,
      `--kubeconfig=${cp.kubeconfig}`,
      `--root-dir=${join(dir, 'kubelet')}`,
      `--cert-dir=${join(dir, 'kubelet-pki')}`,
      `--hostname-override=${nodeName}`,
      `--node-ip=${net.gateway}`,
    ]);
    start('kube-proxy', join(bin, 'kube-proxy'), [
      `--kubeconfig=${cp.kubeconfig}`,
      '--proxy-mode=iptables',
      `--hostname-override=${nodeName}`,
      `--cluster-cidr=${net.podRange}`,
      `--bind-address=${net.gateway}`,
      `--nodeport-addresses=${net.gateway}/32`,
      `--healthz-bind-address=127.0.0.1:${proxyHealthz}`,
      `--metrics-bind-address=127.0.0.1:${proxyMetrics}`,
      // Leave the machine's conntrack sysctls alone.
      '--conntrack-max-per-core=0',
    ]);
    podLogs.start();
    const controlPlane = cp;
    return {
      cp,
      nodeName,
      network: net,
      podLogs,
      importDockerImage: (refs, docker = 'docker') => pipeImage(typeof refs === 'string' ? [refs] : refs, docker, socket),
      tasks: async () => (await sh('ctr', ['-a', socket, '-n', 'k8s.io', 'tasks', 'ls', '-q'])).split('\n').filter(Boolean),
      killContainer: async (id) => {
        await sh('ctr', ['-a', socket, '-n', 'k8s.io', 'tasks', 'kill', '-s', 'SIGKILL', id.replace(/^containerd:\/\//, '')]);
      },
      kubectlWithWarnings: (args, stdin) => runKubectl(controlPlane.kubeconfig, args, stdin),
      logs: () => `${cp?.logs() ?? ''}${group.logs()}`,
      stop,
    };
  } catch (e) {
    await stop();
    throw e;
  }
}

/** The kubelet's pod cgroups in the cgroup v1 freezer (this machine mounts v1; the driver is cgroupfs, node-config.ts). */
const POD_FREEZER_ROOT = '/sys/fs/cgroup/freezer/kubepods';

/**
 * Sets every pod cgroup the freezer holds frozen to THAWED, each before its children (a child
 * stays frozen while a parent is); returns their paths.
 */
function thawFrozenPodCgroups(): string[] {
  const thawed: string[] = [];
  const walk = (dir: string): void => {
    const state = join(dir, 'freezer.state');
    let frozen: boolean;
    try {
      frozen = readFileSync(state, 'utf8').trim() !== 'THAWED';
    } catch {
      return; // no freezer hierarchy, or the cgroup went
    }
    if (frozen) {
      try {
        writeFileSync(state, 'THAWED');
        thawed.push(dir);
      } catch {
        // removed meanwhile, or not ours to write: the checks after teardown will say
      }
    }
    let children: string[] = [];
    try {
      children = readdirSync(dir, { withFileTypes: true })
        .filter((e) => e.isDirectory())
        .map((e) => join(dir, e.name));
    } catch {
      // removed meanwhile
    }
    for (const child of children) walk(child);
  };
  walk(POD_FREEZER_ROOT);
  return thawed;
}
