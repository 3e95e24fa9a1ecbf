/**
 * Makes jazzer.js's prebuilt libFuzzer addon load on glibc 2.36 / libstdc++ 12 (Debian 12).
 *
 * `@jazzer.js/fuzzer` ships its native addon inside the npm package (prebuilds/), built on a
 * newer system. Of all it imports, only three references need more than Debian 12 has:
 *
 * - `__isoc23_strtol@GLIBC_2.38`, `__isoc23_strtoul@GLIBC_2.38`: the C23 spellings a newer
 *   compiler emits for strtol/strtoul. They differ from the old ones only in also reading a
 *   `0b` prefix with base 0 or 2; libFuzzer uses them for its numeric flags (-runs=, -seed=).
 *   Rebound to `strtol@GLIBC_2.2.5` / `strtoul@GLIBC_2.2.5` (the symbol names point at the
 *   `strtol` tail of their own string, and their version index at GLIBC_2.2.5's).
 * - `std::ios_base_library_init()@GLIBCXX_3.4.32`: a reference GCC 13's <iostream> plants so a
 *   static link pulls in the stream initialisation; there is no relocation for it (it is never
 *   called or bound), and libstdc++ 12 initialises its streams when it is loaded.
 *
 * The version requirements GLIBC_2.38 and GLIBCXX_3.4.32 are then marked weak (VER_FLG_WEAK),
 * so the dynamic loader does not refuse the file for a version nothing binds to any more.
 * Nothing else in the file changes. The edit is idempotent, and skipped where the addon
 * already loads (a newer glibc). See docs/decisions/0012-fuzzing.md.
 *
 * Usage: node collector/fuzz/jazzer-compat.ts   (run by `make fuzz`)
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';

const SHT_DYNSYM = 11;
const SHT_GNU_VERNEED = 0x6ffffffe;
const SHT_GNU_VERSYM = 0x6fffffff;
const VER_FLG_WEAK = 0x2;
const SYM_SIZE = 24;

/** C23 spelling → the pre-C23 function with the same result for every input libFuzzer gives it. */
const REBIND: Record<string, string> = { __isoc23_strtol: 'strtol', __isoc23_strtoul: 'strtoul' };
/** Versions nothing binds to after the rebinding. */
const WEAKEN = new Set(['GLIBC_2.38', 'GLIBCXX_3.4.32']);
const OLD_LIBC_VERSION = 'GLIBC_2.2.5';

interface Section {
  type: number;
  offset: number;
  size: number;
  link: number;
  info: number;
}

function sections(elf: Buffer): Section[] {
  if (elf.readUInt32BE(0) !== 0x7f454c46 || elf[4] !== 2 || elf[5] !== 1) throw new Error('not a 64-bit little-endian ELF file');
  const shoff = Number(elf.readBigUInt64LE(0x28));
  const shentsize = elf.readUInt16LE(0x3a);
  const shnum = elf.readUInt16LE(0x3c);
  const out: Section[] = [];
  for (let i = 0; i < shnum; i++) {
    const h = shoff + i * shentsize;
    out.push({
      type: elf.readUInt32LE(h + 4),
      offset: Number(elf.readBigUInt64LE(h + 0x18)),
      size: Number(elf.readBigUInt64LE(h + 0x20)),
      link: elf.readUInt32LE(h + 0x28),
      info: elf.readUInt32LE(h + 0x2c),
    });
  }
  return out;
}

function cString(elf: Buffer, at: number): string {
  return elf.toString('latin1', at, elf.indexOf(0, at));
}

/** Applies the edits to `elf` in place; returns what it changed (empty when nothing needed it). */
export function patchAddon(elf: Buffer): string[] {
  const all = sections(elf);
  const find = (type: number): Section => {
    const s = all.find((x) => x.type === type);
    if (s === undefined) throw new Error(`no section of type 0x${type.toString(16)}`);
    return s;
  };
  const dynsym = find(SHT_DYNSYM);
  const dynstr = all[dynsym.link]!;
  const versym = find(SHT_GNU_VERSYM);
  const verneed = find(SHT_GNU_VERNEED);
  const changes: string[] = [];

  // Version requirements: weaken the new ones, find the index of libc's oldest.
  let oldLibcIndex = -1;
  for (let n = 0, vn = verneed.offset; n < verneed.info; n++) {
    const file = cString(elf, dynstr.offset + elf.readUInt32LE(vn + 4));
    const count = elf.readUInt16LE(vn + 2);
    for (let k = 0, va = vn + elf.readUInt32LE(vn + 8); k < count; k++) {
      const name = cString(elf, dynstr.offset + elf.readUInt32LE(va + 8));
      const flags = elf.readUInt16LE(va + 4);
      if (WEAKEN.has(name) && (flags & VER_FLG_WEAK) === 0) {
        elf.writeUInt16LE(flags | VER_FLG_WEAK, va + 4);
        changes.push(`${file} ${name}: weak`);
      }
      if (file === 'libc.so.6' && name === OLD_LIBC_VERSION) oldLibcIndex = elf.readUInt16LE(va + 6);
      va += elf.readUInt32LE(va + 12);
    }
    vn += elf.readUInt32LE(vn + 12);
  }
  if (oldLibcIndex < 0) throw new Error(`no ${OLD_LIBC_VERSION} requirement on libc.so.6`);

  const count = dynsym.size / SYM_SIZE;
  for (let i = 0; i < count; i++) {
    const sym = dynsym.offset + i * SYM_SIZE;
    const nameAt = elf.readUInt32LE(sym);
    const name = cString(elf, dynstr.offset + nameAt);
    const target = REBIND[name];
    if (target === undefined || !name.endsWith(target)) continue;
    elf.writeUInt32LE(nameAt + name.length - target.length, sym);
    elf.writeUInt16LE(oldLibcIndex, versym.offset + i * 2);
    changes.push(`${name} → ${target}@${OLD_LIBC_VERSION}`);
  }
  return changes;
}

function addonPath(): string {
  const require = createRequire(import.meta.url);
  const fuzzerPackage = require.resolve('@jazzer.js/fuzzer/package.json');
  return join(dirname(fuzzerPackage), 'prebuilds', `fuzzer-${process.platform}-${process.arch}.node`);
}

function loads(path: string): true | string {
  try {
    process.dlopen({ exports: {} }, path);
    return true;
  } catch (e) {
    return (e as Error).message;
  }
}

function main(): void {
  const path = addonPath();
  const before = loads(path);
  if (before === true) {
    console.log(`jazzer-compat: ${path} loads as it is`);
    return;
  }
  if (process.platform !== 'linux') throw new Error(`jazzer.js addon does not load: ${before}`);
  const elf = readFileSync(path);
  const changes = patchAddon(elf);
  writeFileSync(path, elf);
  const after = loads(path);
  if (after !== true) throw new Error(`jazzer.js addon still does not load after ${changes.join(', ') || 'no change'}: ${after}`);
  console.log(`jazzer-compat: ${path}: ${changes.join(', ')}`);
}

if (import.meta.main) main();
