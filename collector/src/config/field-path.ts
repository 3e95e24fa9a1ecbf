/**
 * How a problem in a targets file names its field and shows values: field paths relative to
 * the document (`spec.instances[0].logFormat`) and short scalar values, never whole documents.
 */

export type PathSegment = string | number;
export type FieldPath = readonly PathSegment[];

/** One problem found in a document, at a field of it. */
export interface Problem {
  path: FieldPath;
  message: string;
}

/** `spec.instances[0].encodings.databases["my db"]` */
export function formatPath(p: FieldPath): string {
  if (p.length === 0) return '(document)';
  let s = '';
  for (const seg of p) {
    if (typeof seg === 'number') s += `[${seg}]`;
    else if (/^[A-Za-z_][A-Za-z0-9_-]*$/.test(seg)) s += s === '' ? seg : `.${seg}`;
    else s += `[${JSON.stringify(seg.length > 60 ? `${seg.slice(0, 60)}...` : seg)}]`;
  }
  return s;
}

/** A value as shown in a message: short scalars quoted, collections by their type only. */
export function describe(value: unknown): string {
  if (value === null || value === undefined) return 'null';
  if (typeof value === 'string') return JSON.stringify(value.length > 60 ? `${value.slice(0, 60)}...` : value);
  if (typeof value === 'number' || typeof value === 'boolean' || typeof value === 'bigint') return String(value);
  if (Array.isArray(value)) return 'a list';
  if (typeof value === 'object' && Object.getPrototypeOf(value) === Object.prototype) return 'a mapping';
  return `a value of type ${typeof value === 'object' ? (value.constructor?.name ?? 'object') : typeof value}`;
}
