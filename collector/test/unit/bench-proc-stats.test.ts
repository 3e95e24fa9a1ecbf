// The benchmarks' /proc readers (bench/ingest/proc-stats.ts): a process's or thread's stat line
// parsed by name and clock ticks, threads grouped as Node and V8 name them, and a window's
// difference; then the reader against this very process, whose main thread is busy here.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { CLK_TCK, parseStat, processMemory, THREAD_GROUPS, threadCpu, threadCpuDelta, threadGroup } from '../../../bench/ingest/proc-stats.ts';

describe('parseStat', () => {
  it('reads the name between the first ( and the last ), the parent, and utime, stime and the reaped children in seconds', () => {
    // A thread name with a space and parentheses: only the last ")" ends it.
    const line = `4242 (odd (name) x) S 1 4242 4242 0 -1 4194560 100 0 0 0 ${3 * CLK_TCK} ${CLK_TCK / 2} ${CLK_TCK} ${CLK_TCK} 20 0 7 0 12345 0 0`;
    assert.deepEqual(parseStat(line), { name: 'odd (name) x', ppid: 1, user: 3, system: 0.5, reaped: 2 });
  });

  it('refuses text that is not a stat line, quoting it', () => {
    assert.throws(() => parseStat('no parentheses here'), /not a \/proc stat line: 'no parentheses here'/);
  });
});

describe('threadGroup', () => {
  it('names the groups by the thread names Node and V8 give', () => {
    assert.equal(threadGroup('MainThread'), 'main');
    assert.equal(threadGroup('V8Worker'), 'v8 workers');
    assert.equal(threadGroup('libuv-worker'), 'libuv workers');
    assert.equal(threadGroup('SignalInspector'), 'other');
    assert.equal(threadGroup('node'), 'other');
  });
});

describe('threadCpu', () => {
  it("finds this process's main thread and counts CPU it burns between two readings", () => {
    const before = threadCpu(process.pid);
    assert.deepEqual(Object.keys(before).sort(), [...THREAD_GROUPS].sort());
    // Spins until the main thread has 50 ms more CPU (5 clock ticks at 100 Hz), however
    // loaded the machine: the deadline is only there so that a reader that never sees the
    // main thread fails instead of hanging.
    const deadline = performance.now() + 60_000;
    let d = threadCpuDelta(before, threadCpu(process.pid));
    let x = 0;
    while (d.main.user + d.main.system < 0.05 && performance.now() < deadline) {
      const burst = performance.now() + 20;
      while (performance.now() < burst) x += Math.sqrt(x + 1);
      d = threadCpuDelta(before, threadCpu(process.pid));
    }
    assert.ok(x > 0);
    assert.ok(d.main.user + d.main.system >= 0.05, `main thread: ${JSON.stringify(d.main)}`);
    for (const g of THREAD_GROUPS) assert.ok(d[g].user >= 0 && d[g].system >= 0, g);
  });

  it('reads an exited process as no threads', () => {
    const none = threadCpu(2 ** 22 + 1); // above Linux's pid_max
    for (const g of THREAD_GROUPS) assert.deepEqual(none[g], { user: 0, system: 0 });
  });
});

describe('processMemory', () => {
  it("reads this process's resident memory: anonymous and file-backed pages within VmRSS, VmRSS within its peak", () => {
    const m = processMemory(process.pid);
    assert.ok(m !== null);
    assert.ok(m.rssAnon > 0 && m.rssFile > 0, `anonymous ${m.rssAnon}, file-backed ${m.rssFile}`);
    // VmRSS is RssAnon + RssFile + RssShmem, read together from one status file.
    assert.ok(m.rssAnon + m.rssFile <= m.rss, `${m.rssAnon} + ${m.rssFile} > ${m.rss}`);
    assert.ok(m.rss <= m.peakRss);
  });

  it('is null for a process that is gone', () => {
    assert.equal(processMemory(2 ** 22 + 1), null);
  });
});
