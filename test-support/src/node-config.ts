// The configuration files of the real node of real-node.ts, as pure functions: containerd's
// (CRI), the CNI network's and the kubelet's. Everything names only paths under the node's
// private directory and addresses of the node's own bridge, so two nodes cannot collide with
// each other nor with Docker's containerd.

export interface NodeNetwork {
  /** The Linux bridge the pods attach to; its gateway address is the node's InternalIP. */
  readonly bridge: string;
  /** The pods' range (a /24 on this machine only). */
  readonly podRange: string;
  /** The bridge's address, the node's IP and the API server's listen address. */
  readonly gateway: string;
  /** The Services' range (ClusterIPs exist only in kube-proxy's iptables rules). */
  readonly serviceRange: string;
}

/** A private range no other interface here uses (Docker's is 172.17.0.0/16). */
export const defaultNodeNetwork: NodeNetwork = {
  bridge: 'pglogbr0',
  podRange: '10.99.0.0/24',
  gateway: '10.99.0.1',
  serviceRange: '10.98.0.0/24',
};

export interface ContainerdPaths {
  readonly root: string;
  readonly state: string;
  readonly socket: string;
  readonly cniConfDir: string;
  readonly cniBinDir: string;
  readonly sandboxImage: string;
}

/** containerd 1.6's config (version 2) for a CRI-only instance beside Docker's. */
export function containerdConfig(p: ContainerdPaths): string {
  const cri = 'plugins."io.containerd.grpc.v1.cri"';
  return [
    'version = 2',
    `root = ${JSON.stringify(p.root)}`,
    `state = ${JSON.stringify(p.state)}`,
    '[grpc]',
    `  address = ${JSON.stringify(p.socket)}`,
    '[ttrpc]',
    `  address = ${JSON.stringify(`${p.socket}.ttrpc`)}`,
    `[${cri}]`,
    `  sandbox_image = ${JSON.stringify(p.sandboxImage)}`,
    // This machine refuses to lower a process's oom_score_adj; runc fails without this.
    '  restrict_oom_score_adj = true',
    `[${cri}.cni]`,
    `  bin_dir = ${JSON.stringify(p.cniBinDir)}`,
    `  conf_dir = ${JSON.stringify(p.cniConfDir)}`,
    `[${cri}.containerd]`,
    '  default_runtime_name = "runc"',
    `[${cri}.containerd.runtimes.runc]`,
    '  runtime_type = "io.containerd.runc.v2"',
    `[${cri}.containerd.runtimes.runc.options]`,
    // The kubelet's cgroup driver is cgroupfs (this machine mounts cgroup v1, no systemd).
    '  SystemdCgroup = false',
    '',
  ].join('\n');
}

/** bridge + host-local (+ portmap for hostPorts); no masquerade: nothing leaves the machine. */
export function cniConflist(net: NodeNetwork): string {
  return JSON.stringify(
    {
      cniVersion: '1.0.0',
      name: 'pglog-node',
      plugins: [
        {
          type: 'bridge',
          bridge: net.bridge,
          isGateway: true,
          ipMasq: false,
          hairpinMode: true,
          ipam: { type: 'host-local', ranges: [[{ subnet: net.podRange, gateway: net.gateway }]], routes: [{ dst: '0.0.0.0/0' }] },
        },
        { type: 'portmap', capabilities: { portMappings: true } },
      ],
    },
    null,
    2,
  );
}

export interface KubeletOptions {
  readonly runtimeSocket: string;
  readonly clientCaFile: string;
  readonly port: number;
  readonly healthzPort: number;
  readonly net: NodeNetwork;
  /** Where containerd writes the containers' logs for the kubelet (default /var/log/pods, outside the node's directory). */
  readonly podLogsDir: string;
}

/** The KubeletConfiguration (JSON is YAML). */
export function kubeletConfig(o: KubeletOptions): string {
  return JSON.stringify(
    {
      apiVersion: 'kubelet.config.k8s.io/v1beta1',
      kind: 'KubeletConfiguration',
      // This machine mounts cgroup v1, which kubelet 1.35+ refuses unless told otherwise.
      failCgroupV1: false,
      cgroupDriver: 'cgroupfs',
      containerRuntimeEndpoint: `unix://${o.runtimeSocket}`,
      address: o.net.gateway,
      port: o.port,
      readOnlyPort: 0,
      healthzBindAddress: '127.0.0.1',
      healthzPort: o.healthzPort,
      // The API server's calls (logs, exec) authenticate with a client certificate of this CA;
      // anything else is checked against the API server (TokenReview, SubjectAccessReview).
      authentication: { anonymous: { enabled: false }, webhook: { enabled: true }, x509: { clientCAFile: o.clientCaFile } },
      authorization: { mode: 'Webhook' },
      podCIDR: o.net.podRange,
      podLogsDir: o.podLogsDir,
      clusterDomain: 'cluster.local',
      resolvConf: '/etc/resolv.conf',
      failSwapOn: false,
      // A test machine's disk and memory are often fuller than the defaults allow.
      evictionHard: { 'memory.available': '1Mi', 'nodefs.available': '1%', 'imagefs.available': '1%', 'nodefs.inodesFree': '1%' },
      imageGCHighThresholdPercent: 100,
      imageGCLowThresholdPercent: 99,
      serializeImagePulls: false,
    },
    null,
    2,
  );
}
