/**
 * Targets-file test helpers (targets*.test.ts): the fixtures' directory, a valid document to
 * break one field of, and the assertions on a CONFIG_INVALID message's lines.
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { isPglogError } from '@pglog/common/errors.ts';
import { stringify } from 'yaml';

import { parseTargetsFile } from '../../src/config/targets.ts';

export const FIXTURES = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'fixtures');
export const fixture = (name: string): string => path.join(FIXTURES, name);
export const FILE = '/etc/pglog/targets.yaml';

/** The error of a call that must fail validation. */
export function configError(f: () => unknown): string {
  try {
    f();
  } catch (e) {
    assert.ok(isPglogError(e), `not a PglogError: ${String(e)}`);
    assert.equal(e.code, 'CONFIG_INVALID');
    return e.message;
  }
  assert.fail('expected CONFIG_INVALID');
}

/** A valid document as a plain object, for tests to break one field of. */
export function validDoc(name = 'db1'): Record<string, unknown> {
  return {
    apiVersion: 'pglog.io/v1alpha1',
    kind: 'PostgresTarget',
    metadata: { name },
    spec: {
      host: 'db1.example.com',
      user: 'postgres',
      ssh: { privateKeyFile: 'keys/id_ed25519', knownHostsFile: 'keys/known_hosts' },
      instances: [{ name: 'main', dataDirectory: '/var/lib/postgresql/15/main' }],
    },
  };
}

/** Sets (or with `undefined` deletes) the field at a dotted path; numbers index lists. */
export function withField(doc: Record<string, unknown>, dotted: string, value: unknown): Record<string, unknown> {
  const copy = structuredClone(doc);
  const keys = dotted.split('.');
  let o = copy;
  for (const k of keys.slice(0, -1)) o = o[k] as Record<string, unknown>;
  const last = keys.at(-1) as string;
  if (value === undefined) delete o[last];
  else o[last] = value;
  return copy;
}

/** Asserts the single-document text fails with a line naming file, document, object and field. */
export function assertProblem(text: string, field: string, message: RegExp, options?: { object?: string; mode?: 'standalone' | 'cluster' }): void {
  const err = configError(() => parseTargetsFile(text, FILE, options?.mode === undefined ? undefined : { mode: options.mode }));
  const head = `${FILE}: document 1 (PostgresTarget/${options?.object ?? 'db1'}): ${field}: `;
  const line = err.split('\n').find((l) => l.startsWith(head));
  assert.ok(line !== undefined, `no problem for ${field} in:\n${err}`);
  assert.match(line, message);
  assert.match(line, /\(line \d+\)$/);
}

export const brokenField = (dotted: string, value: unknown): string => stringify(withField(validDoc(), dotted, value));
