// One control plane for the small Kubernetes-level test files (the client, informer, events,
// leader election, CRDs, Pod Security, the harness itself), as envtest suites share one per
// package: started once per `node --test` run by the runner's global setup
// (`--test-global-setup=./operator/test/helpers/shared-control-plane.ts`, `make test-operator`),
// which passes its address to the test files' processes in PGLOG_SHARED_CONTROL_PLANE. Each
// file works in a namespace of its own (`useSharedControlPlane(name)` creates it), so the
// files cannot see each other's objects in any order. A file run on its own
// (`node --test operator/test/integration/kube-client.test.ts`) starts a private one instead.
// Files whose subject is a whole cluster (the operator, the real node) keep their own.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before } from 'node:test';

import { createKubeClient, type KubeClientOptions } from '@pglog/common/kube/client.ts';
import type { KubeClient } from '@pglog/common/kube/client-types.ts';
import type { KubeConfig } from '@pglog/common/kube/config.ts';
import { type ControlPlane, type ControlPlaneOptions, runKubectl, startControlPlane } from '@pglog/test-support/control-plane.ts';

const ENV = 'PGLOG_SHARED_CONTROL_PLANE';

/**
 * What every sharing file needs: kube-controller-manager (the harness test's StatefulSet), and
 * no watch cache with compaction every 5 s, so a watch from an old resourceVersion reaches etcd
 * and gets 410 Gone within seconds (the client and informer tests).
 */
const SHARED_OPTIONS: ControlPlaneOptions = {
  controllerManager: true,
  apiserverArgs: ['--watch-cache=false', '--etcd-compaction-interval=5s'],
};

interface SharedDescription {
  server: string;
  token: string;
  kubeconfig: string;
  caCert: string;
}

let owned: ControlPlane | undefined;
let descriptionDir: string | undefined;

/** The runner's global setup: start the shared control plane and tell the test files where it is. */
export async function globalSetup(): Promise<void> {
  owned = await startControlPlane(SHARED_OPTIONS);
  descriptionDir = mkdtempSync(join(tmpdir(), 'pglog-shared-kube-'));
  const file = join(descriptionDir, 'control-plane.json');
  const description: SharedDescription = { server: owned.server, token: owned.token, kubeconfig: owned.kubeconfig, caCert: owned.caCert };
  writeFileSync(file, JSON.stringify(description), { mode: 0o600 });
  process.env[ENV] = file;
}

export async function globalTeardown(): Promise<void> {
  await owned?.stop();
  if (descriptionDir !== undefined) rmSync(descriptionDir, { recursive: true, force: true });
}

export interface SharedControlPlane extends ControlPlane {
  /** This file's own namespace, created on first use; `kubeconfig` and `kubectl` default to it. */
  readonly namespace: string;
}

/**
 * The shared control plane when the runner started one, else a private one with the same
 * options; either way with `namespace` created for this file and a kubeconfig whose context
 * defaults to it. `stop()` stops only a private one.
 */
export async function useSharedControlPlane(namespace: string): Promise<SharedControlPlane> {
  const file = process.env[ENV];
  let cp: ControlPlane;
  if (file === undefined) {
    cp = await startControlPlane(SHARED_OPTIONS);
  } else {
    const d = JSON.parse(readFileSync(file, 'utf8')) as SharedDescription;
    cp = {
      ...d,
      kubectl: async (args, stdin) => (await runKubectl(d.kubeconfig, args, stdin)).stdout,
      logs: () => `(the shared control plane's output is kept by the test runner's process; run this file alone for it)`,
      stop: () => Promise.resolve(),
    };
  }
  await cp.kubectl(['create', 'namespace', namespace]);
  const dir = mkdtempSync(join(tmpdir(), `pglog-kube-${namespace}-`));
  const kubeconfig = join(dir, 'kubeconfig');
  const config = JSON.parse(readFileSync(cp.kubeconfig, 'utf8')) as { contexts: Array<{ context: { namespace?: string } }> };
  for (const c of config.contexts) c.context.namespace = namespace;
  writeFileSync(kubeconfig, JSON.stringify(config), { mode: 0o600 });
  return {
    ...cp,
    namespace,
    kubeconfig,
    kubectl: async (args, stdin) => (await runKubectl(kubeconfig, args, stdin)).stdout,
    async stop() {
      rmSync(dir, { recursive: true, force: true });
      await cp.stop();
    },
  };
}

/** The control plane's admin as a client sees it: its token, and the apiserver's certificate (issued for `kubernetes`). */
export function adminConfig(cp: ControlPlane): KubeConfig {
  return { server: cp.server, caCert: cp.caCert, tlsServerName: 'kubernetes', token: cp.token };
}

export interface SharedKube {
  readonly cp: SharedControlPlane;
  readonly client: KubeClient & { close(): void };
}

/**
 * For a describe(): before its tests, the shared control plane with `namespace` and an admin
 * client of it; after them, the client closed and a private control plane stopped. The two are
 * read through the returned object once the tests run.
 */
export function useSharedKube(namespace: string, clientOptions?: KubeClientOptions): SharedKube {
  let cp: SharedControlPlane | undefined;
  let client: (KubeClient & { close(): void }) | undefined;
  before(async () => {
    cp = await useSharedControlPlane(namespace);
    client = createKubeClient(adminConfig(cp), clientOptions);
  });
  after(async () => {
    client?.close();
    await cp?.stop();
  });
  const ready = <T>(value: T | undefined): T => {
    if (value === undefined) throw new Error('useSharedKube: read before its before() hook ran');
    return value;
  };
  return {
    get cp() {
      return ready(cp);
    },
    get client() {
      return ready(client);
    },
  };
}
