// The server processes one test fixture starts (etcd, kube-apiserver, kubelet, ...): each
// started in the fixture's directory, their output kept in a bounded buffer for failure
// messages, stopped together in reverse start order (SIGTERM, SIGKILL after a grace period).
import { type ChildProcess, spawn } from 'node:child_process';

/** How a child's output chunks are marked in the shared buffer. */
const tag = (name: string): string => `[${name}] `;

export class ChildGroup {
  private readonly children: Array<{ name: string; process: ChildProcess }> = [];
  private readonly output: string[] = [];
  private readonly dir: string;
  private readonly maxChunks: number;

  /** `maxChunks`: output chunks kept; the older half is dropped when it is exceeded. */
  constructor(dir: string, maxChunks: number) {
    this.dir = dir;
    this.maxChunks = maxChunks;
  }

  start(name: string, command: string, args: string[]): ChildProcess {
    const child = spawn(command, args, { cwd: this.dir, stdio: ['ignore', 'pipe', 'pipe'] });
    const keep = (b: Buffer): void => {
      this.output.push(tag(name) + b.toString('utf8'));
      if (this.output.length > this.maxChunks) this.output.splice(0, this.maxChunks / 2);
    };
    child.stdout.on('data', keep);
    child.stderr.on('data', keep);
    this.children.push({ name, process: child });
    return child;
  }

  /** The first child that has ended: its name and how ("exited with code 1"); null while all run. */
  exited(): { name: string; how: string } | null {
    for (const { name, process: c } of this.children) {
      if (c.exitCode !== null) return { name, how: `exited with code ${c.exitCode}` };
      if (c.signalCode !== null) return { name, how: `was killed by ${c.signalCode}` };
    }
    return null;
  }

  /** Drops a child that has ended (a failed attempt to be retried); its output stays. */
  remove(child: ChildProcess): void {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    const at = this.children.findIndex((c) => c.process === child);
    if (at >= 0) this.children.splice(at, 1);
  }

  /** The kept output of the child started as `name`. */
  logsOf(name: string): string {
    const prefix = tag(name);
    return this.output.filter((chunk) => chunk.startsWith(prefix)).join('');
  }

  logs(): string {
    return this.output.join('');
  }

  /** SIGKILL to every child still running. */
  killAll(): void {
    for (const { process: c } of this.children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  }

  /** SIGTERM in reverse start order (dependents first); SIGKILL to those still running after graceMs. */
  async stop(graceMs = 5000): Promise<void> {
    const exits = this.children.map(({ process: c }) =>
      c.exitCode !== null || c.signalCode !== null ? Promise.resolve() : new Promise<void>((r) => c.once('exit', () => r())),
    );
    for (const { process: c } of [...this.children].reverse()) c.kill('SIGTERM');
    const timer = setTimeout(() => this.killAll(), graceMs);
    await Promise.all(exits);
    clearTimeout(timer);
  }
}
