// What the real node's containers wrote, kept beyond their pods' lives: the kubelet removes a
// pod's log directory with the pod, and the end-to-end tests ask afterwards what the collectors
// of scaled-away or replaced pods logged (no errors, no secret). Every 200 ms each log file
// under the kubelet's podLogsDir (`<namespace>_<pod>_<uid>/<container>/<restart>.log`, written
// by containerd) is hard-linked into a directory of ours on the same filesystem: the content
// survives the kubelet's unlink, and what the container writes after the scan still lands in the
// same inode. A file the kubelet rotates away is another inode and is linked in turn.
// What a container writes and loses within one scan of its start is missed; the pods under test
// live for seconds at least.
import { linkSync, mkdirSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';

interface KeptFile {
  readonly namespace: string;
  readonly pod: string;
  readonly uid: string;
  readonly container: string;
  /** Order in which the files were first seen: pods and restarts in the order they started. */
  readonly seq: number;
  readonly path: string;
}

export interface LogQuery {
  namespace: string;
  /** The pod's name, or a predicate over it (`main-0`, or every pod of a StatefulSet). */
  pod: string | ((name: string) => boolean);
  /** Every container when left out. */
  container?: string;
}

/**
 * CRI's log line is `<RFC 3339 time> <stdout|stderr> <P|F> <text>`; a `P` (partial) line is
 * continued by the next line of the same stream. Returns the text lines, partials joined.
 */
export function criLogLines(content: string): string[] {
  const out: string[] = [];
  const partial = new Map<string, string>();
  for (const line of content.split('\n')) {
    const first = line.indexOf(' ');
    const second = line.indexOf(' ', first + 1);
    const third = line.indexOf(' ', second + 1);
    if (first < 0 || second < 0) continue;
    const stream = line.slice(first + 1, second);
    const tag = third < 0 ? line.slice(second + 1) : line.slice(second + 1, third);
    const text = third < 0 ? '' : line.slice(third + 1);
    const joined = (partial.get(stream) ?? '') + text;
    if (tag === 'P') {
      partial.set(stream, joined);
      continue;
    }
    partial.delete(stream);
    out.push(joined);
  }
  for (const rest of partial.values()) out.push(rest);
  return out;
}

export class PodLogKeeper {
  private readonly kept = new Map<string, KeptFile>();
  private timer: NodeJS.Timeout | undefined;
  private seq = 0;

  private readonly podLogsDir: string;
  private readonly keepDir: string;

  constructor(podLogsDir: string, keepDir: string) {
    this.podLogsDir = podLogsDir;
    this.keepDir = keepDir;
    mkdirSync(keepDir, { recursive: true });
  }

  start(): void {
    this.timer ??= setInterval(() => this.scan(), 200);
    this.timer.unref();
  }

  stop(): void {
    this.scan();
    clearInterval(this.timer);
    this.timer = undefined;
  }

  /** Links every log file not linked yet. Files come and go while it runs: what vanished is skipped. */
  scan(): void {
    for (const podDir of list(this.podLogsDir)) {
      const [namespace, pod, uid] = podDir.split('_');
      if (namespace === undefined || pod === undefined || uid === undefined) continue;
      for (const container of list(join(this.podLogsDir, podDir))) {
        for (const file of list(join(this.podLogsDir, podDir, container))) {
          const source = join(this.podLogsDir, podDir, container, file);
          let key: string;
          try {
            const st = statSync(source);
            if (!st.isFile()) continue;
            key = `${st.dev}:${st.ino}`;
          } catch {
            continue;
          }
          if (this.kept.has(key)) continue;
          const dir = join(this.keepDir, podDir, container);
          const path = join(dir, `${this.seq}-${file}`);
          try {
            mkdirSync(dir, { recursive: true });
            linkSync(source, path);
          } catch {
            continue;
          }
          this.kept.set(key, { namespace, pod, uid, container, seq: this.seq++, path });
        }
      }
    }
  }

  /** The text lines the matching containers wrote (stdout and stderr), in the order their files appeared. */
  lines(query: LogQuery): string[] {
    this.scan();
    const podMatches = typeof query.pod === 'string' ? (n: string): boolean => n === query.pod : query.pod;
    return [...this.kept.values()]
      .filter((f) => f.namespace === query.namespace && podMatches(f.pod) && (query.container === undefined || f.container === query.container))
      .sort((a, b) => a.seq - b.seq)
      .flatMap((f) => criLogLines(readFileSync(f.path, 'utf8')).map((l) => (query.container === undefined ? `[${f.pod}/${f.container}] ${l}` : l)));
  }

  /** Every kept line of every container, each prefixed with `[pod/container] ` (for a failure's report). */
  all(namespace: string): string[] {
    return this.lines({ namespace, pod: () => true });
  }
}

function list(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch {
    return [];
  }
}
