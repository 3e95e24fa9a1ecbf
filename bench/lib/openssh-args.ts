/**
 * The OpenSSH client's command line the transport benchmarks measure against: non-interactive,
 * host key checked against the test sshd's known_hosts, no compression (it would hide the
 * cipher's cost), one given cipher; `extra` options (a MAC) go before the destination.
 */
export interface OpensshTarget {
  host: string;
  port: number;
  user: string;
  privateKeyFile: string;
  knownHostsFile: string;
}

export function opensshArgs(to: OpensshTarget, cipher: string, command: string, extra: readonly string[] = []): string[] {
  return [
    '-T',
    '-o',
    'BatchMode=yes',
    '-o',
    'StrictHostKeyChecking=yes',
    '-o',
    `UserKnownHostsFile=${to.knownHostsFile}`,
    '-o',
    'Compression=no',
    '-i',
    to.privateKeyFile,
    '-p',
    String(to.port),
    '-c',
    cipher,
    ...extra,
    `${to.user}@${to.host}`,
    command,
  ];
}
