// A throwaway certificate authority for tests, made with openssl in a directory of the test's
// own: the CA's key and certificate, and certificates it issues (serving or client) next to them.
import { execFile } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** openssl's arguments for a new unencrypted P-256 key. */
const EC_KEY = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'] as const;

export interface TestCa {
  /** `dir/ca.crt`, the CA's certificate (PEM). */
  readonly certFile: string;
  /** Issues `dir/NAME.crt` (key `dir/NAME.key`) for `subject`, valid two days, with the openssl extensions `ext` if given. */
  issue(name: string, subject: string, ext?: string): Promise<void>;
}

/**
 * Creates `dir/ca.key` and `dir/ca.crt` (self-signed for `subject`, valid two days). `key` is
 * openssl's arguments for each new key, the CA's and the issued ones (e.g. `['-newkey', 'rsa:2048', '-nodes']`).
 */
export async function createTestCa(dir: string, subject: string, key: readonly string[] = EC_KEY): Promise<TestCa> {
  const f = (name: string): string => join(dir, name);
  const openssl = async (args: readonly string[]): Promise<void> => {
    await run('openssl', [...args], { cwd: dir });
  };
  await openssl(['req', '-x509', ...key, '-keyout', f('ca.key'), '-out', f('ca.crt'), '-days', '2', '-subj', subject]);
  return {
    certFile: f('ca.crt'),
    async issue(name, certSubject, ext) {
      await openssl(['req', ...key, '-keyout', f(`${name}.key`), '-out', f(`${name}.csr`), '-subj', certSubject]);
      const extArgs = ext === undefined ? [] : ['-extfile', f(`${name}.ext`)];
      if (ext !== undefined) writeFileSync(f(`${name}.ext`), ext);
      const caArgs = ['-CA', f('ca.crt'), '-CAkey', f('ca.key'), '-CAcreateserial'];
      await openssl(['x509', '-req', '-in', f(`${name}.csr`), ...caArgs, '-days', '2', '-out', f(`${name}.crt`), ...extArgs]);
    },
  };
}
