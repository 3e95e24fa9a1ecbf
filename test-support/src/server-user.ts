// The unprivileged system user that test servers run as when the tests run as root (here and
// in CI): PostgreSQL refuses to run as root, and the test sshd logs in as the same user so that
// it can read that PostgreSQL's data and log directories like a real monitoring account would.
import { execFile, execFileSync } from 'node:child_process';
import { userInfo } from 'node:os';

export const SERVER_USER = 'pglog-loggen';

export interface SystemUser {
  name: string;
  uid: number;
  gid: number;
}

export function isRoot(): boolean {
  return process.getuid?.() === 0;
}

/** The user the current process runs as. */
export function currentUser(): SystemUser {
  const info = userInfo();
  return { name: info.username, uid: info.uid, gid: info.gid };
}

function lookupUser(name: string): SystemUser | null {
  try {
    const uid = Number(execFileSync('id', ['-u', name], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim());
    const gid = Number(execFileSync('id', ['-g', name], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim());
    return { name, uid, gid };
  } catch {
    return null;
  }
}

/** The server user's uid and gid, creating the user first when it is missing (as loggen does). */
export function serverUser(): SystemUser {
  const found = lookupUser(SERVER_USER);
  if (found !== null) return found;
  try {
    execFileSync('useradd', ['--system', '--no-create-home', SERVER_USER], { stdio: ['ignore', 'pipe', 'pipe'] });
  } catch (e) {
    // Another test process may have created it at the same moment.
    const again = lookupUser(SERVER_USER);
    if (again !== null) return again;
    throw new Error(`cannot create the user ${SERVER_USER} to run PostgreSQL as: ${String(e)}`);
  }
  const created = lookupUser(SERVER_USER);
  if (created === null) throw new Error(`useradd ${SERVER_USER} succeeded but id cannot find the user`);
  return created;
}

/** The passwd and shadow entries' fields that decide whether sshd lets the user log in. */
function loginFields(name: string): { shell: string; password: string } {
  const passwd = execFileSync('getent', ['passwd', name], { encoding: 'utf8' }).trim().split(':');
  let password = '';
  try {
    password =
      execFileSync('getent', ['shadow', name], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] })
        .trim()
        .split(':')[1] ?? '';
  } catch {
    /* no shadow entry readable: the passwd field decides */
  }
  return { shell: passwd[6] ?? '', password };
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Lets sshd (UsePAM no) log `name` in with a key: a real shell instead of nologin, and a
 * password field of `*` (no password, but not locked: `useradd --system` locks it with `!`,
 * and sshd refuses locked accounts even for keys). Idempotent; several test processes may run
 * it at once, so a busy passwd lock is retried.
 */
export async function allowKeyLogin(name: string): Promise<void> {
  const usable = (): boolean => {
    const { shell, password } = loginFields(name);
    return shell === '/bin/sh' && !password.startsWith('!');
  };
  let lastError: unknown = null;
  for (let attempt = 0; attempt < 50; attempt++) {
    if (usable()) return;
    try {
      await new Promise<void>((resolve, reject) => {
        execFile('usermod', ['-s', '/bin/sh', '-p', '*', name], { timeout: 30_000 }, (err, _stdout, stderr) => {
          if (err === null) resolve();
          else reject(new Error(`usermod -s /bin/sh -p '*' ${name}: ${err.message} ${stderr}`));
        });
      });
    } catch (e) {
      lastError = e; // typically "cannot lock /etc/passwd" while another test process edits it
      await sleep(100 + Math.floor(Math.random() * 200));
    }
  }
  if (!usable()) throw new Error(`cannot make ${name} able to log in over SSH: ${String(lastError)}`);
}
