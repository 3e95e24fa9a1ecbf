/**
 * The credential files the sshproxy sidecar reads (DIR/keys, mode 0600): one file per distinct
 * content, named by its hash, written before desired.json names it and deleted once no server
 * in desired.json uses it.
 *
 * Why by content: a fleet's servers share a monitoring key and one known_hosts that lists them
 * all, and the shared directory is an in-memory volume counted against the pod's memory limit:
 * a copy per server of a known_hosts with thousands of lines would grow with the square of the
 * fleet (issue 46).
 */
import { createHash } from 'node:crypto';
import { chmod, rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';

export class SidecarKeyFiles {
  private readonly dir: string;
  /** File name → the servers that use it and its content until it is on disk. */
  private readonly files = new Map<string, { users: Set<string>; pending: Buffer | null }>();
  private readonly byServer = new Map<string, string[]>();

  /** `dir` is DIR/keys. */
  constructor(dir: string) {
    this.dir = dir;
  }

  /** The names of `server`'s key and known_hosts files (their content given), releasing what it used before. */
  use(server: string, privateKey: Buffer, knownHosts: Buffer): { identityFile: string; knownHostsFile: string } {
    this.release(server);
    const identityFile = this.add(server, 'key', privateKey);
    const knownHostsFile = this.add(server, 'known_hosts', knownHosts);
    this.byServer.set(server, [identityFile, knownHostsFile]);
    return { identityFile, knownHostsFile };
  }

  /** `server` uses no file any more. */
  release(server: string): void {
    const names = this.byServer.get(server);
    if (names === undefined) return;
    this.byServer.delete(server);
    for (const name of names) this.files.get(name)?.users.delete(server);
  }

  /** Writes every file in use that is not on disk yet. */
  async writeNew(): Promise<void> {
    for (const [name, file] of this.files) {
      if (file.pending === null || file.users.size === 0) continue;
      await writePrivateFile(join(this.dir, name), file.pending);
      file.pending = null;
    }
  }

  /** Deletes the files no server uses (after desired.json stopped naming them). */
  async deleteUnused(): Promise<void> {
    for (const [name, file] of [...this.files]) {
      if (file.users.size > 0) continue;
      this.files.delete(name);
      if (file.pending === null) await rm(join(this.dir, name), { force: true });
    }
  }

  private add(server: string, kind: string, content: Buffer): string {
    const name = `${createHash('sha256').update(content).digest('hex').slice(0, 24)}.${kind}`;
    let file = this.files.get(name);
    if (file === undefined) this.files.set(name, (file = { users: new Set(), pending: content }));
    file.users.add(server);
    return name;
  }
}

/** Writes a file only its owner can read, atomically (temp name, then rename). */
async function writePrivateFile(path: string, data: Buffer): Promise<void> {
  const temp = `${path}.${process.pid}.tmp`;
  await writeFile(temp, data, { mode: 0o600 });
  // The mode given to writeFile applies only when the file is created (and is masked by umask).
  await chmod(temp, 0o600);
  await rename(temp, path);
}
