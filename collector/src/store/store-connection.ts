/**
 * How pglog connects to its store: the one way every store connection is made (the
 * collector's StoreWriter, whose sessions also run the migrations and the maintenance, and
 * `pglog report`), so that each resolves names on search_path = pg_catalog, pg_temp
 * (docs/store.md "Store roles and search_path", security review R1).
 *
 * Why: with the default path ("$user", public) a role that may CREATE in schema public (PUBLIC
 * may, before PostgreSQL 15 and on clusters upgraded from one) can plant a function or
 * operator that matches a call of ours more exactly than pg_catalog's, e.g. public.to_char(date,
 * text) for pglog.ensure_partitions' to_char(d, ...) on a date, which pg_catalog only has for
 * timestamps: it then runs as the store owner (the CVE-2018-1058 pattern). On this path only
 * pg_catalog is searched for functions, operators and types; pg_temp, named last, shadows
 * nothing. pglog's own objects are always written pglog.-qualified.
 *
 * The monitored servers' SQL sessions pin their path the same way (sampler/sql-session.ts).
 */
import pg from 'pg';

/** The search_path of every store session. */
export const STORE_SEARCH_PATH = 'pg_catalog, pg_temp';

/**
 * The start-up option that sets it: in force from the first statement, and a client setting,
 * so it wins over ALTER ROLE / ALTER DATABASE ... SET search_path.
 */
export const STORE_SESSION_OPTIONS = '-c search_path=pg_catalog,pg_temp';

/** node-postgres settings of a store client besides the URL and the start-up options, which are ours. */
export type StoreClientConfig = Omit<pg.ClientConfig, 'connectionString' | 'options'>;

/** A client of the store at `url` with the pinned search_path; connect it with connectStore(). */
export function storeClient(url: string, config: StoreClientConfig = {}): pg.Client {
  return new pg.Client({ ...config, connectionString: url, options: STORE_SESSION_OPTIONS });
}

/**
 * Connects a client made by storeClient() and makes sure its path holds: node-postgres lets an
 * `options` parameter of the URL replace the start-up options given beside it, so the session's
 * path is read back and set when it differs. That query names pg_catalog's function
 * qualified, so it is safe on whatever path the session started with.
 */
export async function connectStore(client: pg.Client): Promise<void> {
  await client.connect();
  const res = await client.query<{ path: string }>("SELECT pg_catalog.current_setting('search_path') AS path");
  if (res.rows[0]?.path.replace(/\s+/g, '') !== STORE_SEARCH_PATH.replace(/\s+/g, '')) {
    await client.query(`SET search_path = ${STORE_SEARCH_PATH}`);
  }
}

/** The stable code of the warning below (a log field, like SQL_ROLE_SUPERUSER). */
export const STORE_PUBLIC_CREATE = 'STORE_PUBLIC_CREATE';

/**
 * The warning for a store in whose schemas PUBLIC (every role) may CREATE, or null. pglog's
 * sessions and functions are immune to objects planted there, but other sessions on the store
 * (a person's psql as the store owner, scripts, dashboards' roles) search `public` by default.
 */
export async function publicCreateWarning(client: pg.ClientBase): Promise<{ message: string; fields: { code: string; schemas: string[] } } | null> {
  // has_schema_privilege takes the role name 'public' as the PUBLIC pseudo-role; the schema by
  // oid, so that a store without schema public asks nothing about it.
  const res = await client.query<{ name: string; quoted: string }>(
    `SELECT nspname AS name, quote_ident(nspname) AS quoted FROM pg_namespace
      WHERE has_schema_privilege('public', oid, 'CREATE') AND nspname !~ '^pg_' AND nspname <> 'information_schema'
      ORDER BY 1`,
  );
  const schemas = res.rows.map((r) => r.name);
  if (schemas.length === 0) return null;
  const revoke = res.rows.map((r) => `REVOKE CREATE ON SCHEMA ${r.quoted} FROM PUBLIC;`).join(' ');
  return {
    message:
      `${STORE_PUBLIC_CREATE}: every role of the store may create objects in schema ${schemas.join(', ')} (PUBLIC has CREATE, the default before PostgreSQL 15): ` +
      `a role that can log in to the store database can plant functions and operators there that run as whoever calls them on the default search_path ` +
      `(pglog's own sessions and functions do not). As the schema's owner, run: ${revoke} (docs/store.md "Store roles and search_path")`,
    fields: { code: STORE_PUBLIC_CREATE, schemas },
  };
}
