/**
 * What a devDependency adds to our install, read from package-lock.json (no registry): the
 * packages reachable from it that nothing else we depend on reaches, and their size on disk
 * under node_modules/. Dependencies resolve as Node does (nearest node_modules upwards);
 * workspaces (`link: true`) are followed to their folder.
 */
import { lstatSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

interface LockEntry {
  link?: boolean;
  resolved?: string;
  version?: string;
  dependencies?: Record<string, string>;
  optionalDependencies?: Record<string, string>;
  peerDependencies?: Record<string, string>;
  devDependencies?: Record<string, string>;
}

type Packages = Record<string, LockEntry>;

/** The lock path that `name` required from `from` resolves to, or undefined. */
function resolve(packages: Packages, from: string, name: string): string | undefined {
  let dir = from;
  for (;;) {
    const candidate = dir === '' ? `node_modules/${name}` : `${dir}/node_modules/${name}`;
    if (packages[candidate] !== undefined) return candidate;
    if (dir === '') return undefined;
    const at = dir.lastIndexOf('/node_modules/');
    dir = at === -1 ? '' : dir.slice(0, at);
  }
}

/** Every lock path reachable from `roots` (following links), the roots included. */
function closure(packages: Packages, roots: readonly string[]): Set<string> {
  const seen = new Set<string>();
  const todo = [...roots];
  while (todo.length > 0) {
    let path = todo.pop()!;
    const entry = packages[path];
    if (entry?.link === true && entry.resolved !== undefined) path = entry.resolved;
    if (seen.has(path)) continue;
    seen.add(path);
    const e = packages[path];
    if (e === undefined) continue;
    const deps = {
      ...e.dependencies,
      ...e.optionalDependencies,
      ...e.peerDependencies,
      ...(path === '' || !path.startsWith('node_modules') ? e.devDependencies : {}),
    };
    for (const name of Object.keys(deps)) {
      const to = resolve(packages, path, name);
      if (to !== undefined) todo.push(to);
    }
  }
  return seen;
}

function diskBytes(path: string): number {
  const st = lstatSync(path, { throwIfNoEntry: false });
  if (st === undefined) return 0;
  if (!st.isDirectory()) return st.blocks * 512;
  let total = st.blocks * 512;
  for (const name of readdirSync(path)) total += diskBytes(join(path, name));
  return total;
}

export interface ExtraPackages {
  count: number;
  bytes: number;
  names: string[];
}

/** The packages only `dependency` (a direct dependency of the root) brings, and their disk use. */
export function extraPackages(root: string, dependency: string): ExtraPackages {
  const packages = (JSON.parse(readFileSync(join(root, 'package-lock.json'), 'utf8')) as { packages: Packages }).packages;
  const rootEntry = packages[''] ?? {};
  const direct = (e: LockEntry): string[] => Object.keys({ ...e.dependencies, ...e.devDependencies, ...e.optionalDependencies });
  const workspaces = Object.keys(packages).filter((p) => p !== '' && !p.includes('node_modules'));
  const others = [
    ...direct(rootEntry)
      .filter((n) => n !== dependency)
      .map((n) => `node_modules/${n}`),
    ...workspaces,
  ];
  // Everything else the root and the workspaces depend on, with their own closures.
  const kept = closure(packages, others);
  const mine = [...closure(packages, [`node_modules/${dependency}`])].filter((p) => !kept.has(p));
  // Nested copies live inside their parent's folder: count each folder's bytes once.
  const bytes = mine.filter((p) => !mine.some((q) => q !== p && p.startsWith(`${q}/`))).reduce((sum, p) => sum + diskBytes(join(root, p)), 0);
  const names = mine.map((p) => p.slice(p.lastIndexOf('node_modules/') + 'node_modules/'.length)).sort();
  return { count: mine.length, bytes, names };
}

export function installedVersion(root: string, name: string): string {
  return (JSON.parse(readFileSync(join(root, 'node_modules', name, 'package.json'), 'utf8')) as { version: string }).version;
}
