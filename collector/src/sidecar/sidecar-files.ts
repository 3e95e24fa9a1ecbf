/**
 * The sidecar's file chores in DIR: atomic writes, the key file check, and the clean-up of
 * what a previous sidecar left behind (its processes, FIFOs and control sockets).
 */
import { readdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { lstat, mkdir, readdir, readFile, rename, rm, writeFile } from 'node:fs/promises';

import { CONTROL_DIR, FORWARDS_DIR, KEYS_DIR, type StatusError, STREAMS_DIR } from '@pglog/common/sidecar/contract.ts';

/** Processes the sidecar started and that may still run: read by the next sidecar on DIR. */
export const PIDS_FILE = 'sidecar.pids';

/** Writes `path` so readers see the old or the new content, never a part (temp file, then rename). */
export async function writeFileAtomic(path: string, text: string): Promise<void> {
  const temp = `${path}.tmp-${process.pid}`;
  await writeFile(temp, text, { mode: 0o600 });
  await rename(temp, path);
}

/**
 * A key or known_hosts file the sidecar may hand to ssh: a regular file (not a link), owned
 * by the sidecar's user, and readable by nobody else. Returns why not, or null.
 */
export async function checkKeyFile(dir: string, file: string, uid: number): Promise<StatusError | null> {
  const path = `${dir}/${KEYS_DIR}/${file}`;
  const refuse = (why: string): StatusError => ({ code: 'SSH_KEY_INVALID', message: `${KEYS_DIR}/${file} ${why}; the sidecar refuses it` });
  let st;
  try {
    st = await lstat(path);
  } catch (e) {
    return refuse(`cannot be read (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`);
  }
  if (!st.isFile()) return refuse(st.isSymbolicLink() ? 'is a symbolic link, not a regular file' : 'is not a regular file');
  if (st.uid !== uid) return refuse(`is owned by uid ${st.uid}, not by the sidecar's uid ${uid}`);
  const mode = st.mode & 0o777;
  if ((mode & 0o077) !== 0) return refuse(`has mode 0${mode.toString(8)}; it must be 0600 (no access for group or others)`);
  return null;
}

/** Creates DIR and its subdirectories (DIR/keys is the collector's, but may not exist yet). */
export async function prepareDir(dir: string): Promise<void> {
  await mkdir(dir, { recursive: true, mode: 0o700 });
  for (const sub of [KEYS_DIR, STREAMS_DIR, CONTROL_DIR, FORWARDS_DIR]) await mkdir(`${dir}/${sub}`, { recursive: true, mode: 0o700 });
}

/** Records the pids of live children in DIR/sidecar.pids, synchronously: a crash right after a spawn must not lose one. */
export class PidsFile {
  private readonly path: string;
  private readonly pids = new Set<number>();

  constructor(dir: string) {
    this.path = `${dir}/${PIDS_FILE}`;
  }

  add(pid: number): void {
    this.pids.add(pid);
    this.write();
  }

  delete(pid: number): void {
    if (this.pids.delete(pid)) this.write();
  }

  private write(): void {
    const temp = `${this.path}.tmp-${process.pid}`;
    writeFileSync(temp, [...this.pids].map((p) => `${p}\n`).join(''), { mode: 0o600 });
    renameSync(temp, this.path);
  }
}

export interface StaleCleanup {
  /** Pids of the previous sidecar's processes that were still alive and were killed. */
  killed: number[];
  /** Files removed from DIR/streams, DIR/ctl and DIR/sql. */
  removedFiles: number;
}

/**
 * Undoes a previous sidecar on DIR (one that was killed and could not clean up): kills the
 * processes its pids file names, but only those whose command line still mentions DIR, since
 * a pid may have been reused by anything; then removes its FIFOs, sockets and temp files.
 */
export async function cleanStaleDir(dir: string, waitMs = 3000): Promise<StaleCleanup> {
  let listed: number[] = [];
  try {
    listed = readFileSync(`${dir}/${PIDS_FILE}`, 'utf8')
      .split('\n')
      .filter((l) => /^\d+$/.test(l))
      .map(Number);
  } catch {
    /* no previous sidecar */
  }
  // The pids file can miss a process started just before a SIGKILL: also every process whose
  // arguments name this directory's FIFOs or control sockets (only ours do).
  for (const pid of await strayProcesses(dir)) if (!listed.includes(pid)) listed.push(pid);
  const killed: number[] = [];
  const groups: number[] = [];
  for (const pid of listed) {
    if (pid === process.pid || !(await commandLineMentions(pid, dir))) continue;
    // Children were started in process groups of their own; a stream's group also holds the
    // shell that was still waiting to open a FIFO.
    if (isGroupLeader(pid)) {
      signal(-pid, 'SIGKILL');
      groups.push(pid);
    }
    signal(pid, 'SIGKILL');
    killed.push(pid);
  }
  // Wait for the whole groups, not only their leaders: on a busy machine a member can outlive
  // its leader by a while, still holding a FIFO of DIR open.
  const deadline = Date.now() + waitMs;
  while ((killed.some(isAlive) || groups.some(groupHasLiveMember)) && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 20));
  }

  let removedFiles = 0;
  // sql/: forward sockets bound by the old masters (the new masters would replace them, but a
  // forward no longer wanted would stay).
  for (const sub of [STREAMS_DIR, CONTROL_DIR, FORWARDS_DIR]) {
    let names: string[] = [];
    try {
      names = await readdir(`${dir}/${sub}`);
    } catch {
      /* created by prepareDir */
    }
    for (const name of names) {
      await rm(`${dir}/${sub}/${name}`, { force: true, recursive: true });
      removedFiles++;
    }
  }
  for (const name of await readdir(dir)) {
    if (/\.tmp-\d+$/.test(name)) await rm(`${dir}/${name}`, { force: true });
  }
  await rm(`${dir}/${PIDS_FILE}`, { force: true });
  return { killed, removedFiles };
}

/**
 * Processes (of any parent) whose arguments name a FIFO in DIR/streams or a control socket in
 * DIR/ctl: the stream shells and ssh clients of a sidecar on DIR, and nothing else.
 */
export async function strayProcesses(dir: string): Promise<number[]> {
  const prefixes = [`${dir}/${STREAMS_DIR}/`, `${dir}/${CONTROL_DIR}/`];
  const found: number[] = [];
  for (const name of await readdir('/proc')) {
    if (!/^\d+$/.test(name) || Number(name) === process.pid) continue;
    try {
      const argv = (await readFile(`/proc/${name}/cmdline`, 'utf8')).split('\0');
      if (argv.some((a) => prefixes.some((p) => a.startsWith(p)))) found.push(Number(name));
    } catch {
      /* gone */
    }
  }
  return found;
}

/** SIGKILLs the stray processes of DIR (with their process groups); returns their pids. */
export async function killStrayProcesses(dir: string): Promise<number[]> {
  const pids = await strayProcesses(dir);
  for (const pid of pids) {
    if (isGroupLeader(pid)) signal(-pid, 'SIGKILL');
    signal(pid, 'SIGKILL');
  }
  return pids;
}

async function commandLineMentions(pid: number, dir: string): Promise<boolean> {
  try {
    const argv = (await readFile(`/proc/${pid}/cmdline`, 'utf8')).split('\0');
    return argv.some((a) => a.includes(`${dir}/`));
  } catch {
    return false; // gone
  }
}

/** State and process group of a process (/proc/PID/stat), or null when it is gone. */
function procStat(pid: number | string): { state: string; pgrp: number } | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // "pid (comm) state ppid pgrp ...": comm may hold anything, so split after the last ')'.
    const [state = '', , pgrp = ''] = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return { state, pgrp: Number(pgrp) };
  } catch {
    return null;
  }
}

function isGroupLeader(pid: number): boolean {
  return procStat(pid)?.pgrp === pid;
}

/** Whether a process group still has a member that is not a zombie (a zombie holds nothing open). */
function groupHasLiveMember(pgid: number): boolean {
  let entries: string[];
  try {
    entries = readdirSync('/proc');
  } catch {
    return false;
  }
  return entries.some((e) => {
    if (!/^\d+$/.test(e)) return false;
    const stat = procStat(e);
    return stat !== null && stat.pgrp === pgid && stat.state !== 'Z';
  });
}

/** Alive and not a zombie (an orphan whose new parent has not reaped it yet is dead enough). */
export function isAlive(pid: number): boolean {
  const stat = procStat(pid);
  return stat !== null && stat.state !== 'Z';
}

function signal(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(pid, sig);
  } catch {
    /* already gone */
  }
}
