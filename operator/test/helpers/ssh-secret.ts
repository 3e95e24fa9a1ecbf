/**
 * A target's SSH credentials as a user gives them to the operator: a Secret `NAME-ssh` with the
 * test sshd's client key and known_hosts, labelled so that pglog may serve it (docs/targets.md).
 */
import type { TestSshServer } from '@pglog/test-support/sshd.ts';

/** Creates and labels the Secret `${name}-ssh` through `kubectl` (already pointed at the target's namespace). */
export async function createSshSecret(
  kubectl: (args: string[]) => Promise<unknown>,
  name: string,
  ssh: Pick<TestSshServer, 'privateKeyFile' | 'knownHostsFile'>,
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
  await kubectl(['label', 'secret', `${name}-ssh`, 'pglog.io/ssh-credentials=true']);
}
