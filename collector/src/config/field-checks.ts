/**
 * The building blocks of targets file validation: reading a field that is required, optional
 * or defaulted, reporting unknown fields (with a "did you mean" hint), and checking one value
 * (a string, a port, a host name, a path, labels ...). Each check reports its own problem and
 * returns undefined on failure, so a validator carries on and finds every problem.
 */
import { isIP } from 'node:net';
import path from 'node:path';

import { sshUserProblem } from '@pglog/common/sidecar/contract.ts';

import { canonicalEncoding } from '../logformat/decode.ts';
import { compilePrefix } from '../logformat/prefix.ts';
import type { FieldPath, Problem } from './field-path.ts';
import { describe } from './field-path.ts';
import { closest } from './suggest.ts';

export type Obj = Record<string, unknown>;

export const DNS1123_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
export const DNS1123_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const HOSTNAME_LABEL = /^[A-Za-z0-9](?:[-A-Za-z0-9]{0,61}[A-Za-z0-9])?$/;
const LABEL_NAME = /^[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?$/;
const LABEL_VALUE = /^(?:(?:[A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f]/;

/** Collects the problems of one document; field paths are relative to the document. */
export class FieldChecks {
  readonly problems: Problem[] = [];
  /** The directory of the targets file, the base of relative paths on this machine. */
  private readonly baseDir: string;

  constructor(baseDir: string) {
    this.baseDir = baseDir;
  }

  fail(p: FieldPath, message: string): undefined {
    this.problems.push({ path: p, message });
    return undefined;
  }

  // --- field access ------------------------------------------------------------------------

  /** Reports every key of `o` not in `allowed` (keys in `skip` are reported elsewhere). */
  protected fields(o: Obj, p: FieldPath, allowed: readonly string[], skip: readonly string[] = []): void {
    for (const key of Object.keys(o)) {
      if (allowed.includes(key) || skip.includes(key)) continue;
      const hint = closest(key, allowed);
      this.fail([...p, key], hint !== undefined ? `unknown field; did you mean ${hint}?` : `unknown field; expected one of ${allowed.join(', ')}`);
    }
  }

  /** A mapping with the fields `allowed`: unknown ones are reported, the mapping is still returned. */
  protected object(value: unknown, p: FieldPath, allowed: readonly string[]): Obj | undefined {
    const o = this.mapping(value, p);
    if (o !== undefined) this.fields(o, p, allowed);
    return o;
  }

  protected required<T>(o: Obj, key: string, p: FieldPath, check: (v: unknown, p: FieldPath) => T | undefined): T | undefined {
    if (!Object.hasOwn(o, key)) return this.fail([...p, key], 'required field is missing');
    return check(o[key], [...p, key]);
  }

  protected optional<T>(o: Obj, key: string, p: FieldPath, check: (v: unknown, p: FieldPath) => T | undefined): T | undefined {
    return Object.hasOwn(o, key) ? check(o[key], [...p, key]) : undefined;
  }

  protected defaulted<T>(o: Obj, key: string, p: FieldPath, def: T, check: (v: unknown, p: FieldPath) => T | undefined): T | undefined {
    return Object.hasOwn(o, key) ? check(o[key], [...p, key]) : def;
  }

  // --- value checks (each reports its own problem and returns undefined on failure) ---------

  protected mapping(value: unknown, p: FieldPath, expected = 'expected a mapping'): Obj | undefined {
    if (typeof value === 'object' && value !== null && !Array.isArray(value) && Object.getPrototypeOf(value) === Object.prototype) return value as Obj;
    return this.fail(p, `${expected}, got ${describe(value)}`);
  }

  private string(value: unknown, p: FieldPath): string | undefined {
    if (typeof value !== 'string') return this.fail(p, `expected a string, got ${describe(value)}`);
    if (value === '') return this.fail(p, 'must not be empty');
    return value;
  }

  protected exact(value: unknown, p: FieldPath, expected: string): string | undefined {
    if (value !== expected) return this.fail(p, `expected ${JSON.stringify(expected)}, got ${describe(value)}`);
    return expected;
  }

  protected oneOf<T extends string>(value: unknown, p: FieldPath, allowed: readonly T[]): T | undefined {
    if (typeof value === 'string' && (allowed as readonly string[]).includes(value)) return value as T;
    return this.fail(p, `expected one of ${allowed.join(', ')}, got ${describe(value)}`);
  }

  protected boolean(value: unknown, p: FieldPath): boolean | undefined {
    if (typeof value === 'boolean') return value;
    return this.fail(p, `expected true or false, got ${describe(value)}`);
  }

  protected port(value: unknown, p: FieldPath): number | undefined {
    return this.wholeNumber(value, p, 1, 65535);
  }

  protected wholeNumber(value: unknown, p: FieldPath, min: number, max: number): number | undefined {
    if (typeof value === 'number' && Number.isInteger(value) && value >= min && value <= max) return value;
    return this.fail(p, `expected an integer from ${min} to ${max}, got ${describe(value)}`);
  }

  protected pattern(value: unknown, p: FieldPath, re: RegExp, max: number, what: string): string | undefined {
    const s = this.string(value, p);
    if (s === undefined) return undefined;
    if (s.length > max || !re.test(s)) return this.fail(p, `expected ${what}, at most ${max} characters, got ${describe(s)}`);
    return s;
  }

  protected dnsLabel(value: unknown, p: FieldPath): string | undefined {
    return this.pattern(value, p, DNS1123_LABEL, 63, 'a DNS-1123 label (lower-case letters, digits and "-", starting and ending with a letter or digit)');
  }

  /** A user, role or database name: any non-empty text without whitespace or control characters. */
  protected name(value: unknown, p: FieldPath): string | undefined {
    const s = this.string(value, p);
    if (s === undefined) return undefined;
    if (/\s/.test(s) || CONTROL.test(s)) return this.fail(p, `must not contain whitespace or control characters, got ${describe(s)}`);
    return s;
  }

  /**
   * An SSH user name, by the one rule the CRD and the sshproxy sidecar apply too
   * (SSH_USER_PATTERN): `alice@corp.example.com` is fine, a leading '-', a blank or a control
   * character is not.
   */
  protected sshUser(value: unknown, p: FieldPath): string | undefined {
    const s = this.string(value, p);
    if (s === undefined) return undefined;
    const problem = sshUserProblem(s);
    if (problem !== null) return this.fail(p, `${problem}, got ${describe(s)}`);
    return s;
  }

  protected host(value: unknown, p: FieldPath): string | undefined {
    const s = this.string(value, p);
    if (s === undefined) return undefined;
    if (isIP(s) !== 0) return s;
    const labels = (s.endsWith('.') ? s.slice(0, -1) : s).split('.');
    const hostname = s.length <= 253 && labels.every((l) => HOSTNAME_LABEL.test(l));
    // All-numeric names are malformed IPv4 addresses (999.0.0.1), not host names.
    if (!hostname || labels.every((l) => /^\d+$/.test(l))) return this.fail(p, `expected a host name or an IP address, got ${describe(s)}`);
    return s;
  }

  /** A path on the server: absolute, or (with `base`) relative to `base`; normalized. */
  protected remotePath(value: unknown, p: FieldPath, base: string | undefined): string | undefined {
    const s = this.string(value, p);
    if (s === undefined) return undefined;
    if (CONTROL.test(s)) return this.fail(p, 'must not contain control characters');
    if (base === undefined && !s.startsWith('/')) return this.fail(p, `expected an absolute path on the server, got ${describe(s)}`);
    return path.posix.resolve(base ?? '/', s);
  }

  /** A path on this machine: relative ones are resolved against the targets file's directory. */
  protected localPath(value: unknown, p: FieldPath): string | undefined {
    const s = this.string(value, p);
    if (s === undefined) return undefined;
    if (CONTROL.test(s)) return this.fail(p, 'must not contain control characters');
    if (s === '~' || s.startsWith('~/')) return this.fail(p, '"~" is not expanded; give an absolute path or one relative to the targets file');
    return path.resolve(this.baseDir, s);
  }

  protected prefix(value: unknown, p: FieldPath): string | undefined {
    if (typeof value !== 'string') return this.fail(p, `expected a string, got ${describe(value)}`);
    try {
      compilePrefix(value);
    } catch (e) {
      return this.fail(p, e instanceof Error ? e.message : String(e));
    }
    return value;
  }

  protected encoding(value: unknown, p: FieldPath): string | undefined {
    const s = this.string(value, p);
    if (s === undefined) return undefined;
    try {
      return canonicalEncoding(s);
    } catch (e) {
      return this.fail(p, e instanceof Error ? e.message : String(e));
    }
  }

  /** Labels (`labelValues`: Kubernetes label values) or annotations (any string values). */
  protected stringMap(value: unknown, p: FieldPath, labelValues: boolean): Record<string, string> | undefined {
    const o = this.mapping(value, p);
    if (o === undefined) return undefined;
    const out: Record<string, string> = {};
    let ok = true;
    for (const [k, v] of Object.entries(o)) {
      const q = [...p, k];
      if (!qualifiedName(k)) {
        ok = false;
        this.fail(
          q,
          'expected a key of the form [prefix/]name (name: at most 63 letters, digits, "-", "_" or ".", starting and ending with a letter or digit)',
        );
        continue;
      }
      if (typeof v !== 'string') {
        ok = false;
        this.fail(q, `expected a string, got ${describe(v)}${typeof v === 'number' || typeof v === 'boolean' ? ' (quote it)' : ''}`);
        continue;
      }
      if (labelValues && (v.length > 63 || !LABEL_VALUE.test(v))) {
        ok = false;
        this.fail(q, `expected a label value (at most 63 letters, digits, "-", "_" or ".", starting and ending with a letter or digit), got ${describe(v)}`);
        continue;
      }
      out[k] = v;
    }
    return ok ? out : undefined;
  }
}

/** A Kubernetes qualified name: `[DNS-1123 subdomain/]name`. */
function qualifiedName(key: string): boolean {
  const slash = key.indexOf('/');
  const prefix = slash < 0 ? undefined : key.slice(0, slash);
  const name = slash < 0 ? key : key.slice(slash + 1);
  if (prefix !== undefined && (prefix.length > 253 || !DNS1123_SUBDOMAIN.test(prefix))) return false;
  return name.length <= 63 && LABEL_NAME.test(name);
}
