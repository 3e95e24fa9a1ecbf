// One short-lived pg connection for a test's queries against a store or server: opened, used,
// and closed whatever happens (also when the server went away meanwhile, as in outage tests).
import pg from 'pg';

/** Runs `use` on a client connected to `url` and closes the client afterwards. */
export async function withClient<T>(url: string, use: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url, application_name: 'pglog-test' });
  client.on('error', () => {
    /* a lost connection: reported by the failing query */
  });
  await client.connect();
  try {
    return await use(client);
  } finally {
    await client.end().catch(() => undefined);
  }
}
