/**
 * `make bench` (SSH part): how fast one in-process ssh2 channel streams, per cipher, with
 * ssh2's native crypto binding and without it, and the OpenSSH client for reference, all in
 * one run against one local OpenSSH server (test-support/src/sshd.ts).
 *
 *   node bench/ssh-bench.ts [--mb 512] [--runs 3] [--out FILE.md]
 *
 * The remote command is `head -c N /dev/zero` (no file I/O); the client counts and drops the
 * bytes. Every measurement runs in its own child process (this file with --child), so that:
 * - "without binding" is a real ssh2 without its addon: the child registers a module resolve
 *   hook (node:module registerHooks) that makes `require('./crypto/build/Release/sshcrypto.node')`
 *   fail, exactly as if the addon had not been built; ssh2 then falls back to its JavaScript
 *   ciphers (Node's crypto per packet for AES, a JS Poly1305 for chacha20). ssh2 has no
 *   option for this: it uses the binding for every cipher whenever the addon loads
 *   (createCipher/createDecipher in lib/protocol/crypto.js), and the child checks
 *   bindingAvailable to prove which case ran;
 * - each contender's heap and JIT state are its own.
 * Times cover the stream only (connection set up before the clock starts). For `ssh`, the
 * time of `ssh ... true` (connect, key exchange, auth) is measured separately and subtracted.
 * Client, server and `head` share this machine's cores, so absolute numbers are a floor.
 */
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { registerHooks } from 'node:module';
import { cpus } from 'node:os';
import { parseArgs } from 'node:util';

import { emitReport } from './lib/emit-report.ts';
import { opensshArgs } from './lib/openssh-args.ts';

const CIPHERS = ['aes128-gcm@openssh.com', 'aes256-gcm@openssh.com', 'chacha20-poly1305@openssh.com', 'aes128-ctr'] as const;
/** The MAC for non-AEAD ciphers, the same for ssh2 and OpenSSH (ssh2's first default). */
const MAC = 'hmac-sha2-256-etm@openssh.com';

const { values } = parseArgs({
  options: {
    mb: { type: 'string', default: '512' },
    runs: { type: 'string', default: '3' },
    out: { type: 'string' },
    child: { type: 'boolean', default: false },
    cipher: { type: 'string' },
    'no-binding': { type: 'boolean', default: false },
    host: { type: 'string' },
    port: { type: 'string' },
    user: { type: 'string' },
    key: { type: 'string' },
    'known-hosts': { type: 'string' },
  },
});

interface ChildResult {
  bytes: number;
  seconds: number;
  cipher: string | null;
  binding: boolean;
}

if (values.child) {
  process.stdout.write(JSON.stringify(await childMain()) + '\n');
} else {
  await parentMain();
}

/** One stream in this process: connect, then time `head -c N /dev/zero` to its last byte. */
async function childMain(): Promise<ChildResult> {
  if (values['no-binding']) {
    registerHooks({
      resolve(specifier, context, nextResolve) {
        if (specifier.endsWith('sshcrypto.node')) throw Object.assign(new Error('ssh2 crypto binding hidden by ssh-bench'), { code: 'MODULE_NOT_FOUND' });
        return nextResolve(specifier, context);
      },
    });
  }
  // Imported only now, after the hook: ssh2 probes for its addon when first loaded.
  const { SshConnection } = await import('@pglog/collector/transport/ssh-connection.ts');
  const { ConnectLimiter } = await import('@pglog/collector/transport/connect-limiter.ts');
  const { runRemote } = await import('@pglog/collector/transport/remote-shell.ts');
  const { cryptoBindingAvailable } = await import('@pglog/collector/transport/ssh-algorithms.ts');
  const need = (v: string | undefined, name: string): string => {
    if (v === undefined) throw new Error(`--child needs --${name}`);
    return v;
  };
  const knownHostsFile = need(values['known-hosts'], 'known-hosts');
  const connection = new SshConnection({
    target: 'bench',
    host: need(values.host, 'host'),
    port: Number(need(values.port, 'port')),
    username: need(values.user, 'user'),
    privateKey: readFileSync(need(values.key, 'key')),
    knownHosts: { text: readFileSync(knownHostsFile, 'utf8'), source: knownHostsFile },
    limiter: new ConnectLimiter({ spreadMs: 0 }),
    ciphers: [need(values.cipher, 'cipher') as (typeof CIPHERS)[number]],
  });
  try {
    await runRemote(connection, 'true'); // connect outside the clock
    const bytes = Number(values.mb) * 1024 * 1024;
    const started = process.hrtime.bigint();
    const proc = await connection.spawn(`head -c ${bytes} /dev/zero`);
    let received = 0;
    proc.stderr.resume();
    for await (const chunk of proc.stdout) received += (chunk as Buffer).length;
    const exit = await proc.exit;
    const seconds = Number(process.hrtime.bigint() - started) / 1e9;
    if (exit.code !== 0 || received !== bytes) throw new Error(`stream ended with ${JSON.stringify(exit)} after ${received} of ${bytes} bytes`);
    return { bytes: received, seconds, cipher: connection.negotiatedCipher, binding: cryptoBindingAvailable() };
  } finally {
    await connection.close();
  }
}

interface Row {
  name: string;
  cipher: string;
  seconds: number;
  mbps: number;
}

async function parentMain(): Promise<void> {
  const { startSshServer } = await import('@pglog/test-support/sshd.ts');
  const mb = Number(values.mb);
  const runs = Math.max(1, Number(values.runs));
  const server = await startSshServer();
  const rows: Row[] = [];
  const median = (xs: number[]): number => {
    const s = [...xs].sort((a, b) => a - b);
    return s[Math.floor(s.length / 2)] ?? NaN;
  };
  try {
    const childArgs = (cipher: string, noBinding: boolean): string[] => [
      process.argv[1] ?? new URL(import.meta.url).pathname,
      '--child',
      '--mb',
      String(mb),
      '--cipher',
      cipher,
      '--host',
      server.host,
      '--port',
      String(server.port),
      '--user',
      server.user,
      '--key',
      server.privateKeyFile,
      '--known-hosts',
      server.knownHostsFile,
      ...(noBinding ? ['--no-binding'] : []),
    ];
    const runChild = (cipher: string, noBinding: boolean): number => {
      const r = spawnSync(process.execPath, childArgs(cipher, noBinding), { encoding: 'utf8', maxBuffer: 1 << 20 });
      if (r.status !== 0) throw new Error(`child ${cipher}${noBinding ? ' without binding' : ''} failed: ${r.stderr}`);
      const result = JSON.parse(r.stdout) as ChildResult;
      if (result.binding === noBinding) throw new Error(`child ${cipher}: binding ${result.binding}, expected ${!noBinding}`);
      if (result.cipher !== cipher) throw new Error(`child negotiated ${result.cipher}, expected ${cipher}`);
      return result.seconds;
    };
    const ssh = (cipher: string, command: string): number => {
      const args = opensshArgs(server, cipher, command, ['-m', MAC]);
      const started = process.hrtime.bigint();
      const r = spawnSync('ssh', args, { stdio: ['ignore', 'ignore', 'pipe'] });
      if (r.status !== 0) throw new Error(`ssh -c ${cipher} failed: ${r.stderr.toString()}`);
      return Number(process.hrtime.bigint() - started) / 1e9;
    };
    const record = (name: string, cipher: string, times: number[]): void => {
      const seconds = median(times);
      const row = { name, cipher, seconds, mbps: mb / seconds };
      rows.push(row);
      process.stderr.write(`${name.padEnd(24)} ${cipher.padEnd(30)} ${row.mbps.toFixed(1).padStart(8)} MB/s\n`);
    };
    for (const cipher of CIPHERS) {
      record(
        'ssh2 + native binding',
        cipher,
        Array.from({ length: runs }, () => runChild(cipher, false)),
      );
      record(
        'ssh2, JavaScript only',
        cipher,
        Array.from({ length: runs }, () => runChild(cipher, true)),
      );
      const setup = median([0, 1, 2].map(() => ssh(cipher, 'true')));
      record(
        'OpenSSH ssh',
        cipher,
        Array.from({ length: runs }, () => ssh(cipher, `head -c ${mb * 1024 * 1024} /dev/zero`) - setup),
      );
    }
  } finally {
    await server.dispose();
  }
  const find = (name: string, cipher: string): Row | undefined => rows.find((r) => r.name === name && r.cipher === cipher);
  const ratio = (a: Row | undefined, b: Row | undefined): string => (a === undefined || b === undefined ? '' : (a.mbps / b.mbps).toFixed(2));
  const lines = [
    '## SSH transport: one channel streaming',
    '',
    `${mb} MiB of \`head -c ... /dev/zero\` over loopback through one session channel; ${runs === 1 ? 'one run' : `median of ${runs} runs`} each; ` +
      `${cpus().length} CPUs (${cpus()[0]?.model ?? 'unknown'}), Node ${process.version}, ${spawnSync('ssh', ['-V'], { encoding: 'utf8' }).stderr.trim()}. ` +
      `MAC for aes128-ctr: ${MAC}. "JavaScript only" is ssh2 with its native addon hidden from module resolution in that process.`,
    '',
    '| cipher | ssh2 + binding MB/s | ssh2 JS only MB/s | OpenSSH ssh MB/s | binding / JS | ssh2 + binding / ssh |',
    '|---|---:|---:|---:|---:|---:|',
    ...CIPHERS.map((c) => {
      const b = find('ssh2 + native binding', c);
      const j = find('ssh2, JavaScript only', c);
      const o = find('OpenSSH ssh', c);
      return `| ${c} | ${b?.mbps.toFixed(1) ?? ''} | ${j?.mbps.toFixed(1) ?? ''} | ${o?.mbps.toFixed(1) ?? ''} | ${ratio(b, j)} | ${ratio(b, o)} |`;
    }),
    '',
  ];
  const text = lines.join('\n');
  emitReport(text, values.out);
}
