// The end-to-end tests' cluster, as a user has one: the real node of real-node.ts (kubelet,
// containerd, CNI, kube-proxy, kube-scheduler and the control plane on this machine) with the
// built image (PGLOG_TEST_IMAGE, copied from Docker into the node's containerd, under extra tags
// when a test upgrades to "a new image"), a namespace that enforces and warns Pod Security
// `restricted`, and helm with private cache, config and data directories (nothing of the user's
// is read or written). Servers the pods must reach (sshd, the store) listen on the node's
// gateway address (`node.network.gateway`), which exists only on this machine.
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

import { createKubeClient } from '@pglog/common/kube/client.ts';
import type { KubeClient } from '@pglog/common/kube/client-types.ts';
import { loadKubeconfigFile } from '@pglog/common/kube/config.ts';

import { type ControlPlane, kubeBin } from './control-plane.ts';
import { privateHelmEnv } from './helm.ts';
import { type RealNode, type RealNodeOptions, startRealNode } from './real-node.ts';
import { sleep } from './wait.ts';

const run = promisify(execFile);
const repoRoot = join(import.meta.dirname, '../..');

export interface E2eOptions {
  readonly namespace: string;
  /** The built image, `repository:tag` (PGLOG_TEST_IMAGE). */
  readonly image: string | undefined;
  /** The Docker CLI holding it (PGLOG_TEST_DOCKER). */
  readonly docker: string;
  /** More tags of the same image, for upgrades to "a new image" (`test-next` makes `pglog:test-next`). */
  readonly extraTags?: readonly string[];
  readonly node?: RealNodeOptions;
}

export interface E2eCluster {
  readonly node: RealNode;
  readonly cp: ControlPlane;
  readonly client: KubeClient & { close(): void };
  readonly namespace: string;
  /** A private directory for the test (removed by stop). */
  readonly work: string;
  /** The image's repository and tag, as the chart's values take them. */
  readonly repository: string;
  readonly tag: string;
  /** `image.repository=...,image.tag=...` (the given tag, or the built one) for `helm --set`. */
  imageValues(tag?: string): string;
  /** Runs helm in the namespace; rejects with its stderr. Resolves with stdout and stderr (warnings). */
  helm(args: readonly string[]): Promise<{ stdout: string; stderr: string }>;
  /** kubectl in the namespace. */
  kubectl(args: readonly string[], stdin?: string): Promise<string>;
  /** The chart (and CRDs) of an earlier commit, extracted; returns the chart's directory. */
  chartAt(commit: string): Promise<string>;
  stop(): Promise<void>;
}

/** What a restricted namespace must not see: a Pod Security warning in any client's output. */
export const POD_SECURITY_WARNING = /would violate PodSecurity|PodSecurity "restricted"/;

export async function startE2eCluster(options: E2eOptions): Promise<E2eCluster> {
  if (options.image === undefined || options.image === '')
    throw new Error('PGLOG_TEST_IMAGE names the built image (make test and make e2e build it: make test-image)');
  const colon = options.image.lastIndexOf(':');
  const local = colon > 0 ? options.image.slice(0, colon) : options.image;
  const tag = colon > 0 ? options.image.slice(colon + 1) : 'latest';
  const refs = [options.image, ...(options.extraTags ?? []).map((t) => `${local}:${t}`)];
  // The chart and the operator take only images that name their registry; `ctr import` stores
  // a Docker image `pglog:test` under the name the runtime resolves it to, docker.io/library/pglog:test.
  const repository = qualifiedRepository(local);
  for (const ref of refs.slice(1)) await run(options.docker, ['tag', options.image, ref]);
  const work = mkdtempSync(join(tmpdir(), 'pglog-e2e-'));
  const helmEnv = privateHelmEnv(join(work, 'helm'));
  let node: RealNode | undefined;
  let client: (KubeClient & { close(): void }) | undefined;
  const stop = async (): Promise<void> => {
    client?.close();
    await node?.stop();
    rmSync(work, { recursive: true, force: true });
  };
  try {
    node = await startRealNode(options.node);
    await node.importDockerImage(refs, options.docker);
    const cp = node.cp;
    client = createKubeClient(await loadKubeconfigFile(cp.kubeconfig));
    const ns = options.namespace;
    await cp.kubectl(
      ['apply', '-f', '-'],
      JSON.stringify({
        apiVersion: 'v1',
        kind: 'Namespace',
        metadata: {
          name: ns,
          labels: {
            'pod-security.kubernetes.io/enforce': 'restricted',
            'pod-security.kubernetes.io/warn': 'restricted',
            'pod-security.kubernetes.io/audit': 'restricted',
          },
        },
      }),
    );
    // The service account controller makes `default`; pods wait for it otherwise.
    for (let i = 0; !(await cp.kubectl(['-n', ns, 'get', 'serviceaccounts', '-o', 'name'])).includes('default'); i++) {
      if (i > 240) throw new Error(`no default ServiceAccount in ${ns} after 60 s`);
      await sleep(250);
    }
    const helm = async (args: readonly string[]): Promise<{ stdout: string; stderr: string }> => {
      try {
        return await run(join(kubeBin(), 'helm'), [...args, '--kubeconfig', cp.kubeconfig, '--namespace', ns], { env: helmEnv, maxBuffer: 16 * 1024 * 1024 });
      } catch (e) {
        const err = e as Error & { stderr?: string };
        throw new Error(`helm ${args.join(' ')}: ${err.message}\n${err.stderr ?? ''}\n--- pods of ${ns}:\n${node!.podLogs.all(ns).slice(-60).join('\n')}`, {
          cause: e,
        });
      }
    };
    const cluster: E2eCluster = {
      node,
      cp,
      client,
      namespace: ns,
      work,
      repository,
      tag,
      imageValues: (t = tag) => `image.repository=${repository},image.tag=${t}`,
      helm,
      kubectl: (args, stdin) => cp.kubectl(['-n', ns, ...args], stdin),
      chartAt: async (commit) => {
        const dir = join(work, `chart-${commit}`);
        mkdirSync(dir);
        const archive = join(work, `${commit}.tar`);
        await run('git', ['-C', repoRoot, 'archive', '--output', archive, commit, 'charts', 'crds']);
        await run('tar', ['-xf', archive, '-C', dir]);
        return join(dir, 'charts/pglog');
      },
      stop,
    };
    return cluster;
  } catch (e) {
    await stop();
    throw e;
  }
}

/** `pglog` → `docker.io/library/pglog`, `team/pglog` → `docker.io/team/pglog`; one naming its registry as it is. */
export function qualifiedRepository(repository: string): string {
  const slash = repository.indexOf('/');
  const first = slash < 0 ? '' : repository.slice(0, slash);
  if (first.includes('.') || first.includes(':') || first === 'localhost') return repository;
  return slash < 0 ? `docker.io/library/${repository}` : `docker.io/${repository}`;
}
