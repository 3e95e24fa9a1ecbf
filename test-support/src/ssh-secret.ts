/**
 * A target's SSH credentials as a user gives them to the operator: a Secret `NAME-ssh` with the
 * test sshd's client key and known_hosts, labelled so that pglog may serve it (docs/targets.md).
 */
import type { TestSshServer } from './sshd.ts';

/**
 * Creates the Secret `${name}-ssh` through `kubectl` (already pointed at the target's namespace)
 * and labels it, unless `optIn` is false: a Secret that pglog must refuse to serve.
 */
export async function createSshSecret(
  kubectl: (args: string[]) => Promise<unknown>,
  name: string,
  ssh: Pick<TestSshServer, 'privateKeyFile' | 'knownHostsFile'>,
  { optIn = true }: { optIn?: boolean } = {},
): Promise<void> {
  await kubectl([
    'create',
    'secret',
    'generic',
    `${name}-ssh`,
    `--from-file=id_ed25519=${ssh.privateKeyFile}`,
    `--from-file=known_hosts=${ssh.knownHostsFile}`,
  ]);
  // The Secret opts in to serving pglog (docs/targets.md).
  if (optIn) await kubectl(['label', 'secret', `${name}-ssh`, 'pglog.io/ssh-credentials=true']);
}
