/**
 * What an OpenSSH client's standard error says went wrong, as a StatusError with one of the
 * collector's stable codes (the same ones the in-process ssh2 transport reports, see
 * transport/ssh-errors.ts). Pure. The texts matched are OpenSSH's own (checked against
 * OpenSSH 9.x in test/unit/sshproxy-openssh-errors.test.ts and, live, in
 * test/integration/sshproxy.test.ts). ssh never prints key material, so its lines may be
 * quoted in messages.
 */
import type { ErrorCode } from '@pglog/common/errors.ts';
import type { StatusError } from '@pglog/common/sidecar/contract.ts';

export interface SshTarget {
  host: string;
  port: number;
  user: string;
}

/** Longest message put into status.json. */
export const MAX_MESSAGE_CHARS = 400;

interface Rule {
  code: ErrorCode;
  test: RegExp;
  /** The line to quote: the first line matching this (default `test`). */
  quote?: RegExp;
  what: string;
}

// Order matters: a changed host key also prints "Host key verification failed", and an
// unusable key file is followed by "Permission denied" for the keys that remained.
const RULES: readonly Rule[] = [
  {
    code: 'SSH_HOST_KEY_CHANGED',
    test: /REMOTE HOST IDENTIFICATION HAS CHANGED|Host key for .* has changed|host key mismatch/i,
    quote: /Host key for .* has changed|REMOTE HOST IDENTIFICATION HAS CHANGED/,
    what: 'the server host key differs from the one in known_hosts (refused)',
  },
  {
    code: 'SSH_HOST_KEY_UNKNOWN',
    test: /host key is known for|Host key verification failed/i,
    quote: /host key is known for|Host key verification failed/,
    what: 'the server host key is not in known_hosts (refused)',
  },
  {
    code: 'SSH_KEY_INVALID',
    test: /UNPROTECTED PRIVATE KEY FILE|^Load key /m,
    quote: /^Load key .*|Permissions 0\d+ for .* are too open/m,
    what: 'the private key cannot be used',
  },
  {
    code: 'SSH_AUTH_FAILED',
    test: /Permission denied|Too many authentication failures|No more authentication methods/i,
    what: 'the server refused the private key',
  },
  {
    code: 'SSH_TIMEOUT',
    test: /Timeout, server .* not responding|timed out during banner exchange|Connection timed out during/i,
    what: 'the server stopped answering',
  },
  {
    code: 'SSH_CONNECT_FAILED',
    test: /Connection refused|No route to host|Could not resolve|Name or service not known|Connection timed out|Network is unreachable|Connection reset|closed by remote host|Connection closed by|kex_exchange_identification|Broken pipe/i,
    what: 'the connection failed',
  },
];

/**
 * Classifies what ssh printed before it exited. `exit` says how it ended, for the message
 * when stderr explains nothing.
 */
export function classifyOpenSshError(stderr: string, target: SshTarget, exit: { code: number | null; signal: string | null }): StatusError {
  const where = `${target.user}@${target.host}:${target.port}`;
  const lines = meaningfulLines(stderr);
  const text = lines.join('\n');
  for (const rule of RULES) {
    if (!rule.test.test(text)) continue;
    const quoted = lines.find((l) => (rule.quote ?? rule.test).test(l)) ?? lines[0] ?? '';
    return { code: rule.code, message: bounded(`${where}: ${rule.what}: ${quoted}`) };
  }
  const how = exit.signal !== null ? `was killed by ${exit.signal}` : `exited with code ${exit.code}`;
  const said = lines.slice(0, 2).join(' / ');
  return { code: 'SSH_CONNECT_FAILED', message: bounded(`${where}: ssh ${how}${said === '' ? '' : `: ${said}`}`) };
}

/**
 * The lines that say something: no banners of '@', no blank lines, no carriage returns, and
 * no "channel N: open failed: ..." lines, which a master prints for a forwarded connection
 * the server refused (a missing PostgreSQL socket): they say nothing about why the master
 * itself ended.
 */
export function meaningfulLines(stderr: string): string[] {
  return stderr
    .split(/\r?\n/)
    .map((l) => l.replace(/\r/g, '').trim())
    .filter((l) => l !== '' && !/^@+$/.test(l) && !/^@\s.*@$/.test(l) && !/^channel \d+: open failed/.test(l));
}

function bounded(message: string): string {
  return message.length <= MAX_MESSAGE_CHARS ? message : `${message.slice(0, MAX_MESSAGE_CHARS - 3)}...`;
}
