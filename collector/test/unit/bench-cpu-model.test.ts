// The ingest benchmark's split of the collector's CPU into a cost per second and a cost per MB
// (bench/ingest/cpu-model.ts): fitted from runs at different loads, and what it says about a
// target in ms per MB.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { cpuPerMBAt, fitCpuModel, rateForTarget } from '../../../bench/ingest/cpu-model.ts';

/** A run of a collector that costs `perSecond` ms each second and `perMB` ms per MB, read at `mbps`. */
const run = (perSecond: number, perMB: number, mbps: number) => ({ readMBps: mbps, cpuMsPerMB: perMB + perSecond / mbps });

describe('fitCpuModel', () => {
  it('finds both costs again from two runs at different loads', () => {
    const m = fitCpuModel([run(120, 28, 17.66), run(120, 28, 4.99)]);
    assert.ok(m !== null);
    assert.ok(Math.abs(m.perSecondMs - 120) < 1e-9);
    assert.ok(Math.abs(m.perMBMs - 28) < 1e-9);
    assert.deepEqual([m.fromMBps, m.toMBps], [4.99, 17.66]);
  });

  it('fits a line by least squares through more than two runs', () => {
    // CPU ms per second 100 + 30 x, with +5 and -5 ms/s of noise at the outer points: the
    // slope loses (8 x 5 + 8 x 5) / (8^2 + 8^2) ms per MB.
    const samples = [
      { readMBps: 2, cpuMsPerMB: (160 + 5) / 2 },
      { readMBps: 10, cpuMsPerMB: 400 / 10 },
      { readMBps: 18, cpuMsPerMB: (640 - 5) / 18 },
    ];
    const m = fitCpuModel(samples);
    assert.ok(m !== null);
    assert.ok(Math.abs(m.perMBMs - (30 - 80 / 128)) < 1e-9, String(m.perMBMs));
    assert.ok(Math.abs(m.perSecondMs + m.perMBMs * 10 - 400) < 1e-9);
  });

  it('gives no model when the loads are too close to tell the costs apart, or a run is missing', () => {
    assert.equal(fitCpuModel([run(120, 28, 5), run(120, 28, 5.5)]), null);
    assert.equal(fitCpuModel([run(120, 28, 5)]), null);
    assert.equal(fitCpuModel([run(120, 28, 5), { readMBps: NaN, cpuMsPerMB: 30 }]), null);
    assert.equal(fitCpuModel([run(120, 28, 5), { readMBps: 0, cpuMsPerMB: Infinity }]), null);
  });
});

describe('what the model says about a target in ms per MB', () => {
  const model = { perSecondMs: 120, perMBMs: 28, fromMBps: 5, toMBps: 17.7 };

  it('gives the CPU per MB at any read rate', () => {
    assert.equal(cpuPerMBAt(model, 10), 40);
    assert.equal(cpuPerMBAt(model, 50), 30.4);
  });

  it('has no read rate for a target at or under the cost per MB alone', () => {
    assert.equal(rateForTarget(model, 20), null);
    assert.equal(rateForTarget(model, 28), null);
  });

  it('names the read rate from which a target above the cost per MB is met', () => {
    assert.equal(rateForTarget(model, 40), 10);
    assert.equal(rateForTarget({ ...model, perSecondMs: -3 }, 40), 0);
  });
});
