// The collector of the SQL snapshot tests (collect-sql, collect-sql-role): the real
// `pglog collect` with its metrics on a free local port, short batches, and its output in
// WORK/collector.log.
import { join } from 'node:path';

import { freePort } from '@pglog/test-support/collect-scenario.ts';
import { type CollectorProcess, startCollector } from '@pglog/test-support/collector-process.ts';

export async function startSqlCollector(work: string, targetsFile: string, storeUrl: string): Promise<{ collector: CollectorProcess; metricsPort: number }> {
  const metricsPort = await freePort();
  const collector = startCollector({
    targetsFile,
    storeUrl,
    outputFile: join(work, 'collector.log'),
    args: ['--listen', `127.0.0.1:${metricsPort}`, '--batch-ms', '100'],
  });
  return { collector, metricsPort };
}
