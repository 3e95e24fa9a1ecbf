// The follow planner (which file to read next, from where) against a model server whose log
// PostgreSQL rotates by new names or logrotate by rename or copytruncate, and a model reader that
// commits and crashes: a fast-check property that every byte of every file is read exactly once,
// in order; then starts, waits, gaps (a file gone or truncated with no copy) and file ordering.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import type { StartPoint } from '@pglog/common/api/postgres-target.ts';
import fc from 'fast-check';

import { formatIdentity, HEAD_BYTES, parseIdentity } from '../../../src/follow/identity.ts';
import { classifyLogFileName } from '../../../src/follow/log-files.ts';
import { orderFiles, type Plan, planNext, planStart } from '../../../src/follow/planner.ts';
import { checksumKey, type ChecksumRequest, type ProbedFile, type ProbeResult } from '../../../src/follow/probe-script.ts';
import type { FollowPosition } from '../../../src/follow/types.ts';

/**
 * A model server: files (name → inode, content, mtime) written by a PostgreSQL-like writer and
 * rotated by PostgreSQL (new names, current_logfiles) or logrotate (rename+create,
 * copytruncate). Every stretch of writing into one file between rotations is a "generation";
 * its first byte is unique, like the timestamp that starts a real log.
 */
interface ModelFile {
  inode: number;
  content: string;
  mtime: number;
  gen: number;
}
type Mode = 'postgres' | 'logrotate';

class World {
  readonly files = new Map<string, ModelFile>();
  readonly generations: string[] = [];
  clock = 1;
  nextInode = 100;
  activeName: string;
  pgSeq = 0;
  readonly mode: Mode;
  /** Whether logrotate's copy keeps the original's mtime (or gets the time of copying). */
  readonly copyKeepsMtime: boolean;

  constructor(mode: Mode, copyKeepsMtime = true) {
    this.mode = mode;
    this.copyKeepsMtime = copyKeepsMtime;
    this.activeName = mode === 'postgres' ? this.pgName() : 'x.log';
    this.create(this.activeName);
  }

  private pgName(): string {
    return `postgresql-${String(++this.pgSeq).padStart(4, '0')}.log`;
  }

  private create(name: string): void {
    this.generations.push('');
    this.files.set(name, { inode: this.nextInode++, content: '', mtime: this.clock, gen: this.generations.length - 1 });
  }

  append(text: string): void {
    const f = this.files.get(this.activeName);
    if (f === undefined) throw new Error('no active file');
    // The generation's first byte is unique, like a log's leading timestamp.
    const bytes = (f.content === '' ? String.fromCharCode(0x100 + f.gen) : '') + text;
    f.content += bytes;
    this.generations[f.gen] += bytes;
    f.mtime = ++this.clock;
  }

  rotate(kind: 'new-name' | 'rename' | 'copytruncate'): void {
    if (this.mode === 'postgres' || kind === 'new-name') {
      if (this.mode !== 'postgres') return;
      this.activeName = this.pgName();
      this.create(this.activeName);
      return;
    }
    // logrotate: x.log.N → x.log.N+1 (rename keeps inode and mtime)
    for (let n = 20; n >= 1; n--) {
      const f = this.files.get(`x.log.${n}`);
      if (f !== undefined) {
        this.files.delete(`x.log.${n}`);
        this.files.set(`x.log.${n + 1}`, f);
      }
    }
    const live = this.files.get('x.log');
    if (live === undefined) throw new Error('no x.log');
    if (kind === 'rename') {
      this.files.delete('x.log');
      this.files.set('x.log.1', live);
      this.create('x.log');
    } else {
      this.files.set('x.log.1', { inode: this.nextInode++, content: live.content, mtime: this.copyKeepsMtime ? live.mtime : this.clock, gen: live.gen });
      this.generations.push('');
      live.content = '';
      live.gen = this.generations.length - 1;
      live.mtime = ++this.clock;
    }
  }

  probe(requests: readonly ChecksumRequest[]): ProbeResult {
    const files: ProbedFile[] = [];
    for (const [name, f] of this.files) {
      const cls = classifyLogFileName(name, 'stderr');
      if (cls === null) throw new Error(`model name ${name}`);
      files.push({ path: `/log/${name}`, inode: String(f.inode), size: f.content.length, mtime: f.mtime, primary: cls.primary, ageRank: cls.ageRank });
    }
    const active = this.files.get(this.activeName);
    const checksums = new Map<string, string>();
    for (const r of requests) {
      const f = this.files.get(r.path.slice('/log/'.length));
      if (f !== undefined && f.content.length >= r.length) checksums.set(checksumKey(String(f.inode), r.length), crc(f.content.slice(0, r.length)));
    }
    return { files, activeInode: active === undefined ? null : String(active.inode), checksums };
  }

  byInode(inode: string): ModelFile {
    for (const f of this.files.values()) if (String(f.inode) === inode) return f;
    throw new Error(`no inode ${inode}`);
  }
}

/** The model's "cksum": any injective function of the head will do for the planner. */
function crc(head: string): string {
  let h = 0n;
  for (const ch of head) h = h * 65537n + BigInt(ch.charCodeAt(0)) + 1n;
  return h.toString();
}

function planWithChecksums(world: World, position: FollowPosition | null, startAt: StartPoint = 'newest'): Plan {
  let requests: ChecksumRequest[] = [];
  for (let round = 0; round < 5; round++) {
    const plan = planNext(position, world.probe(requests), { startAt });
    if (plan.kind !== 'checksums') return plan;
    requests = [...requests, ...plan.requests];
  }
  throw new Error('planner kept asking for checksums');
}

/** A reader that behaves like LogFollower + a consumer committing positions, with crashes. */
class Reader {
  position: FollowPosition | null = null;
  committed: { position: FollowPosition | null; outputLength: number } = { position: null, outputLength: 0 };
  /** What reached the store: (generation, bytes) pieces in order. */
  output: { gen: number; bytes: string; newFile: boolean }[] = [];
  currentGen: number | null = null;
  readonly world: World;
  constructor(world: World) {
    this.world = world;
  }

  step(): boolean {
    const plan = planWithChecksums(this.world, this.position);
    if (plan.kind === 'wait') return false;
    assert.equal(plan.kind, 'read');
    if (plan.kind !== 'read') return false;
    assert.equal(plan.gap, null, `unexpected gap: ${plan.gap?.reason}`);
    const source = this.world.byInode(plan.read.inode);
    const bytes = source.content.slice(plan.read.offset);
    if (plan.continues) {
      assert.ok(this.position !== null);
      assert.equal(plan.read.offset, this.position.offset);
      if (this.currentGen !== null) assert.equal(source.gen, this.currentGen, 'a continued read must stay in the same logical file');
    } else {
      assert.equal(plan.read.offset, 0);
      assert.ok(bytes.length > 0 || plan.read.follow, 'a new file is announced only with bytes');
    }
    if (!plan.continues || this.currentGen === null) this.currentGen = source.gen;
    if (bytes.length === 0 && plan.continues) return false;
    this.output.push({ gen: source.gen, bytes, newFile: !plan.continues });
    let file = plan.read.file;
    // Identity upgrade as the segment script reports it (head of the file we read).
    const id = parseIdentity(file.identity);
    assert.ok(id !== null);
    const headLength = Math.min(source.content.length, HEAD_BYTES);
    if (id.headLength < headLength)
      file = { path: file.path, identity: formatIdentity({ inode: id.inode, headLength, crc: crc(source.content.slice(0, headLength)) }) };
    this.position = { file, offset: plan.read.offset + bytes.length };
    return true;
  }

  commit(): void {
    this.committed = { position: this.position, outputLength: this.output.length };
  }

  crash(): void {
    this.output.length = this.committed.outputLength;
    this.position = this.committed.position;
    this.currentGen = null;
  }

  drain(): void {
    for (let i = 0; i < 1000 && this.step(); i++) {
      /* read all there is */
    }
  }
}

type Op = { op: 'append'; text: string } | { op: 'rotate'; kind: 'new-name' | 'rename' | 'copytruncate' } | { op: 'read' } | { op: 'commit' } | { op: 'crash' };

const opArb: fc.Arbitrary<Op> = fc.oneof(
  { weight: 5, arbitrary: fc.string({ minLength: 1, maxLength: 8 }).map((text): Op => ({ op: 'append', text })) },
  { weight: 2, arbitrary: fc.constantFrom('new-name', 'rename', 'copytruncate').map((kind): Op => ({ op: 'rotate', kind })) },
  { weight: 4, arbitrary: fc.constant<Op>({ op: 'read' }) },
  { weight: 2, arbitrary: fc.constant<Op>({ op: 'commit' }) },
  { weight: 1, arbitrary: fc.constant<Op>({ op: 'crash' }) },
);

function run(mode: Mode, ops: Op[], copyKeepsMtime = true): { world: World; reader: Reader } {
  const world = new World(mode, copyKeepsMtime);
  const reader = new Reader(world);
  // The very first start reads the active file only (older files are history, not backlog):
  // the model begins with a first read and commit, so every later resume has a position.
  world.append('first');
  reader.step();
  reader.commit();
  for (const o of ops) apply(world, reader, o);
  reader.drain();
  return { world, reader };
}

/** One step of the model; with `commits` false a commit op does nothing (only a stored start to go back to). */
function apply(world: World, reader: Reader, o: Op, commits = true): void {
  switch (o.op) {
    case 'append':
      world.append(o.text);
      break;
    case 'rotate':
      world.rotate(o.kind);
      break;
    case 'read':
      reader.step();
      break;
    case 'commit':
      if (commits) reader.commit();
      break;
    case 'crash':
      reader.crash();
      break;
  }
}

/**
 * Every non-empty generation, whole, once, in the order written; each begun as a new file.
 * With `from` (a stored first start), generations before it are not expected and its own from
 * the start's offset (it is resumed, not begun).
 */
function assertExactlyOnce(world: World, reader: Reader, from?: { gen: number; offset: number }): void {
  const received = new Map<number, string>();
  const order: number[] = [];
  for (const piece of reader.output) {
    if (!received.has(piece.gen)) {
      order.push(piece.gen);
      assert.ok(piece.newFile || piece.gen === from?.gen, `generation ${piece.gen} began without a file item`);
    } else assert.equal(order.at(-1), piece.gen, `generation ${piece.gen} resumed after another began`);
    received.set(piece.gen, (received.get(piece.gen) ?? '') + piece.bytes);
  }
  const expected = world.generations
    .map((content, gen) => ({ gen, content: gen === from?.gen ? content.slice(from.offset) : content }))
    .filter((g) => g.content !== '' && (from === undefined || g.gen >= from.gen));
  assert.deepEqual(
    order,
    expected.map((g) => g.gen),
  );
  for (const g of expected) assert.equal(received.get(g.gen), g.content, `generation ${g.gen}`);
}

/** The first start as the stream makes it: planStart's position, stored before anything is read. */
function pinStart(world: World, reader: Reader, startAt: StartPoint): { gen: number; offset: number } | null {
  let requests: ChecksumRequest[] = [];
  for (let round = 0; round < 3; round++) {
    const plan = planStart(world.probe(requests), startAt);
    if (plan.kind === 'wait') return null;
    if (plan.kind === 'start') {
      reader.position = plan.position;
      reader.commit();
      const id = parseIdentity(plan.position.file.identity);
      assert.ok(id !== null);
      return { gen: world.byInode(id.inode).gen, offset: plan.position.offset };
    }
    requests = [...requests, ...plan.requests];
  }
  throw new Error('planStart kept asking for checksums');
}

describe('planner', () => {
  for (const mode of ['postgres', 'logrotate'] as const) {
    for (const startAt of ['newest', 'oldest', 'now'] as const) {
      it(`a first start stored before reading (${startAt}, ${mode}): crashes before any commit lose nothing, rotations in between`, () => {
        fc.assert(
          fc.property(fc.array(opArb, { maxLength: 20 }), fc.array(opArb, { maxLength: 60 }), (before, ops) => {
            const world = new World(mode);
            world.append('startup');
            for (const o of before) {
              if (o.op === 'append') world.append(o.text);
              else if (o.op === 'rotate') world.rotate(o.kind);
            }
            const reader = new Reader(world);
            const from = pinStart(world, reader, startAt);
            assert.ok(from !== null, 'a file has bytes: the start is chosen at once');
            if (startAt === 'oldest') assert.deepEqual(from, { gen: world.generations.findIndex((g) => g !== ''), offset: 0 });
            // No commit but the stored start: every crash goes back to it.
            for (const o of ops) apply(world, reader, o, false);
            reader.drain();
            assertExactlyOnce(world, reader, from);
          }),
          { numRuns: 300 },
        );
      });
    }
  }

  it('planStart: newest from 0, oldest from 0, now at the end; an empty newest file is the end of the one before', () => {
    const world = new World('postgres');
    world.append('old');
    world.rotate('new-name');
    world.append('new');
    const at = (startAt: StartPoint): string => {
      const r = new Reader(world);
      const from = pinStart(world, r, startAt);
      return `${r.position?.file.path}@${from?.offset}`;
    };
    assert.equal(at('newest'), '/log/postgresql-0002.log@0');
    assert.equal(at('oldest'), '/log/postgresql-0001.log@0');
    assert.equal(at('now'), `/log/postgresql-0002.log@${world.files.get('postgresql-0002.log')?.content.length}`);
    world.rotate('new-name');
    assert.equal(at('newest'), `/log/postgresql-0002.log@${world.files.get('postgresql-0002.log')?.content.length}`);
    assert.deepEqual(planStart(new World('postgres').probe([]), 'oldest'), { kind: 'wait', reason: '/log/postgresql-0001.log is still empty' });
  });

  for (const mode of ['postgres', 'logrotate'] as const) {
    it(`reads every byte of every file exactly once, in order, across ${mode} rotations, reads and crashes`, () => {
      fc.assert(
        fc.property(fc.array(opArb, { maxLength: 80 }), fc.boolean(), (ops, copyKeepsMtime) => {
          const { world, reader } = run(mode, ops, copyKeepsMtime);
          assertExactlyOnce(world, reader);
        }),
        { numRuns: 1000 },
      );
    });
  }

  it('several rotations while down are read in order after a resume from a mid-file position', () => {
    const world = new World('logrotate');
    world.append('one');
    const reader = new Reader(world);
    reader.step();
    reader.commit();
    world.append('two');
    world.rotate('rename');
    world.append('three');
    world.rotate('copytruncate');
    world.append('four');
    world.rotate('rename');
    world.append('five');
    reader.crash();
    reader.drain();
    assertExactlyOnce(world, reader);
  });

  it('starts at the active file, at 0 or at its end', () => {
    const world = new World('postgres');
    world.append('old');
    world.rotate('new-name');
    world.append('new file');
    const fromStart = planWithChecksums(world, null);
    assert.ok(fromStart.kind === 'read' && fromStart.read.path.endsWith('0002.log') && fromStart.read.offset === 0 && fromStart.read.follow);
    const fromEnd = planWithChecksums(world, null, 'now');
    assert.ok(fromEnd.kind === 'read' && fromEnd.read.offset === world.files.get('postgresql-0002.log')?.content.length);
  });

  it('waits while there is no log file, and for an empty newest file', () => {
    assert.deepEqual(planNext(null, { files: [], activeInode: null, checksums: new Map() }, { startAt: 'newest' }), {
      kind: 'wait',
      reason: 'no log file yet',
      drained: false,
    });
    const world = new World('postgres');
    assert.equal(planWithChecksums(world, null).kind, 'wait');
  });

  it('reports a gap when the file is gone with no copy, and goes on with the newest file', () => {
    const world = new World('postgres');
    world.append('lost');
    const reader = new Reader(world);
    reader.step();
    const position = reader.position;
    world.rotate('new-name');
    world.append('next');
    world.files.delete('postgresql-0001.log');
    const plan = planWithChecksums(world, position);
    assert.equal(plan.kind, 'read');
    if (plan.kind !== 'read') return;
    assert.ok(plan.gap !== null && plan.gap.file === position?.file && plan.gap.fromOffset === 5 && /gone/.test(plan.gap.reason));
    assert.ok(plan.read.path.endsWith('0002.log') && plan.read.offset === 0 && !plan.continues);
  });

  it('reports a gap when the file was truncated in place with no copy, and rereads it from 0', () => {
    const world = new World('logrotate');
    world.append('aaaaaaaa');
    const reader = new Reader(world);
    reader.step();
    const live = world.files.get('x.log');
    assert.ok(live !== undefined);
    live.content = 'b';
    const plan = planWithChecksums(world, reader.position);
    assert.ok(plan.kind === 'read' && plan.gap !== null && /truncated/.test(plan.gap.reason) && plan.read.path === '/log/x.log' && plan.read.offset === 0);
  });

  it('orders by mtime, the active file last, x.2 before x.1 before x on equal mtimes', () => {
    const f = (path: string, inode: string, mtime: number, primary: boolean, ageRank: number): ProbedFile => ({
      path,
      inode,
      size: 1,
      mtime,
      primary,
      ageRank,
    });
    const files = [f('x', '1', 5, true, 0), f('x.1', '2', 5, false, 1), f('x.2', '3', 5, false, 2), f('a', '4', 9, true, 0), f('b', '5', 1, true, 0)];
    assert.deepEqual(
      orderFiles(files, '4').map((x) => x.path),
      ['b', 'x.2', 'x.1', 'x', 'a'],
    );
    assert.deepEqual(
      orderFiles(files, '5').map((x) => x.path),
      ['x.2', 'x.1', 'x', 'a', 'b'],
    );
  });
});
