// The ingest benchmark's split of a V8 CPU profile by stage (bench/ingest/cpu-profile.ts): a
// builtin or native frame is charged to its nearest caller in a stage's file, idle is kept
// apart, and only samples inside the window count.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { type CpuProfile, splitProfile } from '../../../bench/ingest/cpu-profile.ts';

const src = '/work/pglog/collector/src';
const frame = (functionName: string, url = ''): { functionName: string; url: string } => ({ functionName, url });

// root ─┬─ (idle)
//       ├─ (garbage collector)
//       ├─ commit (store/store-writer.ts) ── encodeRows (store/copy-binary.ts) ── writeBuffer (native)
//       ├─ push (logformat/line-splitter.ts) ── indexOf (native)
//       └─ tick (node:internal/timers) ── onData (node_modules/ssh2/lib/client.js) ── scan (protocol/event-parser.ts)
const profile: CpuProfile = {
  nodes: [
    { id: 1, callFrame: frame('(root)'), children: [2, 3, 4, 7, 9] },
    { id: 2, callFrame: frame('(idle)') },
    { id: 3, callFrame: frame('(garbage collector)') },
    { id: 4, callFrame: frame('commit', `file://${src}/store/store-writer.ts`), children: [5] },
    { id: 5, callFrame: frame('encodeRows', `file://${src}/store/copy-binary.ts`), children: [6] },
    { id: 6, callFrame: frame('writeBuffer') },
    { id: 7, callFrame: frame('push', `file://${src}/logformat/line-splitter.ts`), children: [8] },
    { id: 8, callFrame: frame('indexOf') },
    { id: 9, callFrame: frame('listOnTimeout', 'node:internal/timers'), children: [10] },
    { id: 10, callFrame: frame('onData', 'file:///work/pglog/node_modules/ssh2/lib/client.js'), children: [11] },
    { id: 11, callFrame: frame('scan', `file://${src}/logformat/event-parser.ts`) },
  ],
  startTime: 1_000_000,
  endTime: 1_010_000,
  // One sample every 1000 µs: sample i is at 1_000_000 + 1000 * (i + 1).
  samples: [2, 6, 6, 6, 8, 11, 11, 3, 9, 2, 6],
  timeDeltas: [1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000],
};

describe('splitProfile', () => {
  it('charges native frames to the nearest caller a stage owns; idle apart; shares of the busy time', () => {
    // The last sample has no next one: it weighs nothing.
    const r = splitProfile(profile);
    const ms = Object.fromEntries(r.stages.map((s) => [s.stage, s.ms]));
    assert.equal(ms['row encoding'], 3);
    assert.equal(ms['splitting'], 1);
    assert.equal(ms['parsing'], 2, 'a parser frame under ssh2 is parsing, not SSH');
    assert.equal(ms['GC'], 1);
    assert.equal(ms['other JS'], 1, 'a timer frame with no stage above it');
    assert.equal(ms['idle'], 2);
    assert.equal(r.busyMs, 8);
    assert.equal(r.stages.find((s) => s.stage === 'row encoding')!.share, 3 / 8);
  });
  it('counts only the samples inside the window', () => {
    // Samples at 1_002_000 .. 1_005_000: 6, 6, 6, 8.
    const r = splitProfile(profile, 1_002_000, 1_005_000);
    const ms = Object.fromEntries(r.stages.map((s) => [s.stage, s.ms]));
    assert.equal(ms['row encoding'], 3);
    assert.equal(ms['splitting'], 1);
    assert.equal(r.busyMs, 4);
    assert.equal(r.windowMs, 4);
  });
});
