// Sessions to a test cluster (pg-cluster.ts) as any role and database, all ended by endAll():
// the snapshot tests open several per test (lock holders, waiters, observers, monitors).
import type { Cluster } from '@pglog/test-support/pg-cluster.ts';
import pg from 'pg';

export class ClusterClients {
  private readonly open: pg.Client[] = [];

  private readonly cluster: () => Cluster;

  /** `cluster` is read at each connect: tests start their cluster in `before`. */
  constructor(cluster: () => Cluster) {
    this.cluster = cluster;
  }

  async connect(user: string, database: string, applicationName = 'pglog-test'): Promise<pg.Client> {
    const { socketDir, port } = this.cluster();
    const c = new pg.Client({ host: socketDir, port, user, database, application_name: applicationName });
    c.on('error', () => {
      /* seen through the queries */
    });
    await c.connect();
    this.open.push(c);
    return c;
  }

  async endAll(): Promise<void> {
    for (const c of this.open.splice(0))
      await c.end().catch(() => {
        /* already closed */
      });
  }
}
