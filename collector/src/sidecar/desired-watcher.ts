/**
 * Follows DIR/desired.json: fs.watch on DIR for a prompt reaction to the collector's rename,
 * and a poll as the fallback (watches miss events on some file systems and across a
 * directory replaced under them). A file that does not parse keeps the previous state; the
 * error is reported until a good file arrives. A file that parses may still refuse single
 * entries (see parseDesiredState): those come with the state.
 */
import { type FSWatcher, watch } from 'node:fs';
import { readFile } from 'node:fs/promises';

import { DESIRED_FILE, DesiredStateError, type ParsedDesiredState, parseDesiredState } from '@pglog/common/sidecar/contract.ts';

export const DESIRED_POLL_MS = 500;

export interface DesiredEvents {
  /** A new desired state parsed (its wrong entries refused one by one, in `state.refused`). */
  onDesired(state: ParsedDesiredState): void;
  /** The file changed and cannot be applied (null: the last file was good); `generation` is the refused file's, when known. */
  onError(message: string | null, generation?: number | null): void;
}

export class DesiredWatcher {
  private readonly path: string;
  private readonly dir: string;
  private readonly events: DesiredEvents;
  private readonly pollMs: number;
  private watcher: FSWatcher | null = null;
  private poll: NodeJS.Timeout | undefined;
  private lastText: string | null = null;
  private seen = false;
  private checking = false;
  private again = false;
  private closed = false;

  constructor(dir: string, events: DesiredEvents, pollMs = DESIRED_POLL_MS) {
    this.dir = dir;
    this.path = `${dir}/${DESIRED_FILE}`;
    this.events = events;
    this.pollMs = pollMs;
  }

  /** Reads the file once (resolves after the first state, if any, was handed over), then follows it. */
  async start(): Promise<void> {
    try {
      this.watcher = watch(this.dir, { persistent: false }, (_event, name) => {
        if (name === null || name === DESIRED_FILE) this.check();
      });
      this.watcher.on('error', () => {
        this.watcher?.close();
        this.watcher = null;
      }); // the poll carries on
    } catch {
      this.watcher = null;
    }
    await this.read();
    this.poll = setInterval(() => this.check(), this.pollMs);
  }

  close(): void {
    this.closed = true;
    clearInterval(this.poll);
    this.watcher?.close();
    this.watcher = null;
  }

  /** Reads now, or once more after the read in progress. */
  private check(): void {
    if (this.closed) return;
    if (this.checking) {
      this.again = true;
      return;
    }
    void this.read(); // read() handles its own errors
  }

  private async read(): Promise<void> {
    this.checking = true;
    try {
      do {
        this.again = false;
        let text: string;
        try {
          text = await readFile(this.path, 'utf8');
        } catch (e) {
          const code = (e as NodeJS.ErrnoException).code;
          // Before the collector's first write there is nothing to apply and nothing wrong.
          if (code === 'ENOENT' && !this.seen) continue;
          if (this.lastText !== null || code !== 'ENOENT')
            this.events.onError(`${DESIRED_FILE} cannot be read (${code ?? (e as Error).message}); keeping the previous state`);
          this.lastText = null;
          continue;
        }
        this.seen = true;
        if (text === this.lastText || this.closed) continue;
        this.lastText = text;
        let state: ParsedDesiredState;
        try {
          state = parseDesiredState(text);
        } catch (e) {
          this.events.onError(`${(e as Error).message}; keeping the previous state`, e instanceof DesiredStateError ? e.generation : null);
          continue;
        }
        this.events.onError(null);
        this.events.onDesired(state);
      } while (this.again && !this.closed);
    } finally {
      this.checking = false;
    }
  }
}
