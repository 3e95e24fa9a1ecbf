/**
 * A target's SSH credentials as a user gives them to the operator: a Secret `NAME-ssh` with the
 * test sshd's client key and known_hosts, labelled so that pglog may serve it and annotated with
 * the targets that may use it (docs/targets.md).
 */
import type { TestSshServer } from './sshd.ts';

/**
 * Creates the Secret `${name}-ssh` through `kubectl` (already pointed at the target's namespace)
 * and labels it, unless `optIn` is false: a Secret that pglog must refuse to serve. It serves the
 * PostgresTargets `targets` (by default the one called `name`; `['*']`: every target of the
 * namespace, as a fleet's one shared key).
 */
export async function createSshSecret(
  kubectl: (args: string[]) => Promise<unknown>,
  name: string,
  ssh: Pick<TestSshServer, 'privateKeyFile' | 'knownHostsFile'>,
  { optIn = true, targets = [name] }: { optIn?: boolean; targets?: readonly string[] } = {},
): Promise<void> {
  await kubectl([
    'create',
    'secret',
    'generic',
    `${name}-ssh`,
    `--from-file=id_ed25519=${ssh.privateKeyFile}`,
    `--from-file=known_hosts=${ssh.knownHostsFile}`,
  ]);
  // The Secret names its users (docs/decisions/0034-secrets-name-their-users.md) ...
  await kubectl(['annotate', 'secret', `${name}-ssh`, `pglog.io/allowed-targets=${targets.join(',')}`]);
  // ... and opts in to serving pglog (docs/targets.md).
  if (optIn) await kubectl(['label', 'secret', `${name}-ssh`, 'pglog.io/ssh-credentials=true']);
}
