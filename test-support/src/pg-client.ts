// One short-lived pg connection for a test's queries against a store or server: opened, used,
// and closed whatever happens.
import pg from 'pg';

/** Runs `use` on a client connected to `url` and closes the client afterwards. */
export async function withClient<T>(url: string, use: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return await use(client);
  } finally {
    await client.end();
  }
}
