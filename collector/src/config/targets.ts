/**
 * The standalone targets file: a YAML stream of `PostgresTarget` objects, read and validated
 * once at start-up (`pglog collect --targets FILE`). Reference: docs/targets.md.
 *
 * Validation is hand-written and strict: wrong types, values out of range, missing required
 * fields and unknown fields (with a "did you mean" hint for typos) are all errors. Every
 * problem in the file is collected and reported together in one PglogError('CONFIG_INVALID'),
 * one line per problem:
 *
 *     FILE: document N (PostgresTarget/NAME): spec.instances[0].logFormat: expected one of stderr, csvlog, jsonlog, got "csv" (line 17)
 *
 * YAML syntax errors are reported as `FILE:LINE:COLUMN: document N: YAML syntax error: ...`.
 * Messages name fields and show short scalar values, never whole documents.
 *
 * The result is normalized: defaults applied, encodings canonical, `logDirectory` an absolute
 * path on the server, and (standalone) key file paths absolute on this machine, resolved
 * against the directory of the targets file.
 *
 * This file reads the stream and reports; target-validation.ts holds the schema, built from
 * the field and value checks of field-checks.ts.
 */
import { isUtf8 } from 'node:buffer';
import { readFile } from 'node:fs/promises';
import path from 'node:path';

import type { PostgresTarget, TargetsMode } from '@pglog/common/api/postgres-target.ts';
import { TARGET_KIND } from '@pglog/common/api/postgres-target.ts';
import { PglogError } from '@pglog/common/errors.ts';
import type { Document } from 'yaml';
import { LineCounter, parseAllDocuments } from 'yaml';

import type { Obj } from './field-checks.ts';
import type { FieldPath } from './field-path.ts';
import { describe, formatPath } from './field-path.ts';
import { DocumentValidator } from './target-validation.ts';

export interface TargetsFileOptions {
  /**
   * `standalone` (default): SSH credentials are key files, resolved against the file's
   * directory. `cluster`: SSH credentials are a Secret reference.
   */
  mode?: TargetsMode;
}

/** At most this many problems are listed; the rest are counted. */
const MAX_PROBLEMS = 100;

/**
 * Reads and validates a targets file. Throws PglogError('INPUT_UNREADABLE') when the file
 * cannot be read or is not UTF-8, PglogError('CONFIG_INVALID') listing every problem.
 */
export async function loadTargetsFile(file: string, options?: TargetsFileOptions): Promise<PostgresTarget[]> {
  let bytes: Buffer;
  try {
    bytes = await readFile(file);
  } catch (e) {
    const why = e instanceof Error && 'code' in e && typeof e.code === 'string' ? e.code : String(e);
    throw new PglogError('INPUT_UNREADABLE', `${file}: cannot read the targets file (${why})`, { cause: e });
  }
  if (!isUtf8(bytes)) throw new PglogError('INPUT_UNREADABLE', `${file}: the targets file is not valid UTF-8`);
  return parseTargetsFile(bytes.toString('utf8'), file, options);
}

/**
 * Parses and validates the text of a targets file (a YAML stream; empty documents are
 * skipped). `file` names the file in messages and is the base of relative key file paths.
 * Returns the targets in file order, normalized; throws PglogError('CONFIG_INVALID') listing
 * every problem found.
 */
export function parseTargetsFile(text: string, file: string, options?: TargetsFileOptions): PostgresTarget[] {
  const mode = options?.mode ?? 'standalone';
  const baseDir = path.dirname(path.resolve(file));
  const lines = new LineCounter();
  const docs = parseAllDocuments(text, { lineCounter: lines, prettyErrors: false });
  const problems: string[] = [];
  const targets: PostgresTarget[] = [];
  /** `namespace/name` → number of the document that declared it first. */
  const seen = new Map<string, number>();

  docs.forEach((doc, i) => {
    const n = i + 1;
    const yamlErrors = [...doc.errors, ...doc.warnings];
    if (yamlErrors.length > 0) {
      for (const e of yamlErrors) {
        const { line, col } = lines.linePos(e.pos[0]);
        problems.push(`${file}:${line}:${col}: document ${n}: YAML syntax error: ${e.message}`);
      }
      return;
    }
    const value: unknown = doc.toJS({ maxAliasCount: 100 });
    if (value === null || value === undefined) return; // an empty document
    const v = new DocumentValidator(mode, baseDir);
    const target = v.target(value);
    const label = `${TARGET_KIND}/${objectName(value)}`;
    if (v.metadata !== undefined) {
      const { name, namespace } = v.metadata;
      const key = `${namespace ?? ''}/${name}`;
      const first = seen.get(key);
      if (first === undefined) seen.set(key, n);
      else
        v.fail(
          ['metadata', 'name'],
          `duplicate name ${JSON.stringify(name)}${namespace !== undefined ? ` in namespace ${namespace}` : ''}: document ${first} has it too`,
        );
    }
    // In the order of the file, so the list reads top-down (the sort is stable).
    const located = v.problems.map((p) => ({ ...p, line: fieldLine(doc, lines, p.path) }));
    located.sort((a, b) => a.line - b.line);
    for (const p of located) {
      problems.push(`${file}: document ${n} (${label}): ${formatPath(p.path)}: ${p.message}${p.line > 0 ? ` (line ${p.line})` : ''}`);
    }
    if (target !== undefined && v.problems.length === 0) targets.push(target);
  });

  if (problems.length === 0 && targets.length === 0) problems.push(`${file}: no ${TARGET_KIND} objects in the file`);
  if (problems.length > 0) {
    const shown = problems.slice(0, MAX_PROBLEMS);
    if (problems.length > MAX_PROBLEMS) shown.push(`${file}: ... and ${problems.length - MAX_PROBLEMS} more problems`);
    throw new PglogError('CONFIG_INVALID', shown.join('\n'));
  }
  return targets;
}

/** Line of the field, or of its nearest parent that is in the document; 0 if unknown. */
function fieldLine(doc: Document.Parsed, lines: LineCounter, p: FieldPath): number {
  for (let n = p.length; n >= 0; n--) {
    const node: unknown = doc.getIn(p.slice(0, n), true);
    if (typeof node === 'object' && node !== null && 'range' in node && Array.isArray(node.range)) {
      const start: unknown = node.range[0];
      if (typeof start === 'number') return lines.linePos(start).line;
    }
  }
  return 0;
}

/** The object's name for messages: `metadata.name` when it is a short plain string, else `?`. */
function objectName(value: unknown): string {
  if (typeof value !== 'object' || value === null) return '?';
  const metadata: unknown = (value as Obj)['metadata'];
  if (typeof metadata !== 'object' || metadata === null) return '?';
  const name: unknown = (metadata as Obj)['name'];
  if (typeof name !== 'string' || name === '') return '?';
  return /^[A-Za-z0-9._-]{1,63}$/.test(name) ? name : describe(name);
}
