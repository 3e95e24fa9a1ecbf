// JSON logs: one object per line, levels by name, target children, and no secret in any line:
// canary strings planted in fields, nested objects, error messages, causes, stacks and URLs.
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { test } from 'node:test';

import { childForTarget, createLogger, serializeError } from '@pglog/common/observability/logger.ts';
import { processSecrets, registerSecret, SecretScrubber } from '@pglog/common/observability/redact.ts';

/** A destination that keeps every line written to it. */
function capture(): { stream: Writable; lines: () => string[] } {
  const chunks: string[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _enc, done): void {
      chunks.push(chunk.toString('utf8'));
      done();
    },
  });
  return {
    stream,
    lines: () =>
      chunks
        .join('')
        .split('\n')
        .filter((l) => l !== ''),
  };
}

function parsed(lines: string[]): Record<string, unknown>[] {
  return lines.map((l) => JSON.parse(l) as Record<string, unknown>);
}

test('lines are JSON objects with a level name, an ISO time and the message; children name their target', () => {
  const out = capture();
  const log = createLogger({ level: 'info', destination: out.stream, secrets: new SecretScrubber() });
  log.debug('not written at info');
  log.info({ rows: 3 }, 'committed');
  childForTarget(log, 'db1', 'main').warn('slow');
  childForTarget(log, 'db2').error('down');
  const [a, b, c, ...rest] = parsed(out.lines());
  assert.equal(rest.length, 0);
  assert.equal(a?.level, 'info');
  assert.equal(a?.msg, 'committed');
  assert.equal(a?.rows, 3);
  assert.match(String(a?.time), /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
  assert.deepEqual([b?.level, b?.target, b?.instance, b?.msg], ['warn', 'db1', 'main', 'slow']);
  assert.deepEqual([c?.level, c?.target, c?.instance], ['error', 'db2', undefined]);
});

test('no canary secret reaches the output, whatever path it takes', () => {
  const out = capture();
  const secrets = new SecretScrubber();
  const log = createLogger({ level: 'trace', destination: out.stream, secrets });
  const keyText =
    '-----BEGIN OPENSSH PRIVATE KEY-----\nCANARYKEYLINE1xxxxxxxxxxxxxxxxxxxxxxxx\nCANARYKEYLINE2yyyyyyyyyyyyyyyyyyyyyyyy\n-----END OPENSSH PRIVATE KEY-----';
  secrets.register(keyText);
  secrets.register('CANARY-STOREPW"with\\quotes');

  // Fields named like secrets, at several depths.
  log.info({ password: 'CANARY-F1', privateKey: 'CANARY-F2', ssh: { passphrase: 'CANARY-F3', key: 'CANARY-F4' } }, 'fields');
  log.info({ a: { b: { token: 'CANARY-F5', secret: 'CANARY-F6' } }, headers: { authorization: 'Bearer CANARY-F7' } }, 'nested');
  // URLs in fields and messages: the host stays, the password goes.
  log.info({ url: 'postgres://pglog:CANARY-U1@store.example/pglog', store: { url: 'postgresql://u:CANARY-U2@h/db' } }, 'urls');
  log.warn('connecting to postgres://pglog:CANARY-U3@store.example/pglog?password=CANARY-U4');
  // Errors: message, nested cause, stack, a non-Error cause.
  const inner = new Error(`auth failed for key ${keyText}`);
  const middle = new Error('store postgres://x:CANARY-E1@h/db refused', { cause: inner });
  log.error({ err: new Error('collect failed', { cause: middle }) }, 'failure');
  log.error(new Error('the password is CANARY-STOREPW"with\\quotes', { cause: 'string cause CANARY-STOREPW"with\\quotes' }));
  // A registered secret copied into an arbitrary field or the message.
  log.info({ note: `line ${keyText.split('\n')[1] ?? ''} of the key` }, `pw CANARY-STOREPW"with\\quotes in a message`);
  log.info({ deep: { deeper: { deepest: { list: [`${keyText}`] } } } }, 'deep');
  childForTarget(log, 'db1').info({ password: 'CANARY-C1' }, 'child');

  const lines = out.lines();
  assert.equal(lines.length, 9);
  for (const line of lines) {
    assert.doesNotMatch(line, /CANARY/, line);
    JSON.parse(line); // still valid JSON after scrubbing
  }
  const all = lines.join('\n');
  assert.match(all, /store\.example\/pglog/);
  const failure = parsed(lines)[4]?.err as { message: string; cause: { message: string; cause: { message: string } } };
  assert.equal(failure.message, 'collect failed');
  assert.equal(failure.cause.message, 'store postgres://x:[REDACTED]@h/db refused');
  assert.equal(failure.cause.cause.message, 'auth failed for key [REDACTED]');
});

test('registerSecret feeds the process-wide scrubber that loggers use by default', () => {
  const out = capture();
  const log = createLogger({ level: 'info', destination: out.stream });
  registerSecret('CANARY-PROCESS-WIDE');
  log.info({ anything: 'value CANARY-PROCESS-WIDE' }, 'CANARY-PROCESS-WIDE in the message');
  const [line] = out.lines();
  assert.ok(line !== undefined);
  assert.doesNotMatch(line, /CANARY/);
  assert.ok(processSecrets.size > 0);
});

test('serializeError keeps type, code and the cause chain, and stops at a cycle', () => {
  const e = new Error('outer') as Error & { code?: string };
  e.code = 'STORE_UNAVAILABLE';
  const cyclic = new Error('loop', { cause: e });
  e.cause = cyclic;
  const s = serializeError(e, new SecretScrubber());
  assert.ok(typeof s === 'object');
  assert.equal(s.type, 'Error');
  assert.equal(s.code, 'STORE_UNAVAILABLE');
  let depth = 0;
  for (let c: unknown = s; typeof c === 'object' && c !== null; c = (c as { cause?: unknown }).cause) depth++;
  assert.ok(depth <= 9, `depth ${depth}`);
  assert.equal(serializeError({ password: 'x' }, new SecretScrubber()), '{"password":"x"}');
});
