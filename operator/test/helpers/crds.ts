/**
 * The repository's CRDs (crds/*.yaml) put into a test control plane with kubectl, then waited
 * for until the API server serves them: what every operator test and the operator benchmark do
 * before they create PostgresTargets, CollectorPools or CollectorShards.
 */
import { readdirSync } from 'node:fs';
import { join } from 'node:path';

import type { ControlPlane } from '@pglog/test-support/control-plane.ts';

export const CRD_DIR = join(import.meta.dirname, '../../../crds');

/** Applies every crds/*.yaml (idempotent: a shared control plane may have them already) and waits until each is Established. */
export async function installCrds(cp: Pick<ControlPlane, 'kubectl'>): Promise<void> {
  const files = readdirSync(CRD_DIR)
    .filter((f) => f.endsWith('.yaml'))
    .sort();
  await cp.kubectl(['apply', ...files.flatMap((f) => ['-f', join(CRD_DIR, f)])]);
  await cp.kubectl([
    'wait',
    '--for=condition=Established',
    '--timeout=60s',
    'crd/postgrestargets.pglog.io',
    'crd/collectorpools.pglog.io',
    'crd/collectorshards.pglog.io',
  ]);
}
