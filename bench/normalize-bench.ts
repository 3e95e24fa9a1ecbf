/**
 * Query normalization throughput: `normalizeQuery` and `TemplateCache.template` on generated
 * pgbench-like (TPC-B script) statements and on a mix with longer ORM-style statements (joins,
 * quoted identifiers, IN lists of 50 integers, comments, multi-row VALUES).
 *
 *   node bench/normalize-bench.ts [--count N] [--runs R] [--module PATH]
 *
 * MB/s counts the UTF-8 bytes of the SQL text. The best of R runs counts; template() runs on a
 * fresh cache each run. --module benchmarks another copy of normalize.ts (before/after).
 */
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';

import type * as Normalize from '@pglog/collector/logformat/normalize/normalize.ts';
import { pgbenchStatement } from '@pglog/test-support/pgbench-statements.ts';

const { values } = parseArgs({
  options: {
    count: { type: 'string', default: '1000000' },
    runs: { type: 'string', default: '5' },
    module: { type: 'string' },
  },
});
const count = Number(values.count);
const runs = Number(values.runs);
const modulePath =
  values.module === undefined ? new URL('../collector/src/logformat/normalize/normalize.ts', import.meta.url).href : pathToFileURL(resolve(values.module)).href;
const { normalizeQuery, TemplateCache } = (await import(modulePath)) as typeof Normalize;

/** Deterministic pseudo-random integers (xorshift32), so every run sees the same text. */
let seed = 2463534242;
function rnd(n: number): number {
  seed ^= seed << 13;
  seed ^= seed >>> 17;
  seed ^= seed << 5;
  return (seed >>> 0) % n;
}

function pgbench(k: number): string {
  return pgbenchStatement(k, rnd);
}

function ints(n: number): string {
  return Array.from({ length: n }, () => String(rnd(1_000_000))).join(', ');
}

function date(): string {
  return `'2024-${String(1 + rnd(12)).padStart(2, '0')}-${String(1 + rnd(28)).padStart(2, '0')} ${String(rnd(24)).padStart(2, '0')}:${String(rnd(60)).padStart(2, '0')}:00'`;
}

function orm(k: number): string {
  switch (k % 6) {
    case 0:
      return `SELECT "User"."id", "User"."email", "User"."created_at" AS "createdAt", "Orders"."id" AS "Orders.id", "Orders"."total" AS "Orders.total" FROM "users" AS "User" LEFT OUTER JOIN "orders" AS "Orders" ON "User"."id" = "Orders"."user_id" WHERE "User"."id" IN (${ints(50)}) AND "User"."deleted_at" IS NULL ORDER BY "User"."id" DESC LIMIT 20;`;
    case 1:
      return `SELECT "posts".* FROM "posts" INNER JOIN "comments" ON "comments"."post_id" = "posts"."id" WHERE "posts"."author_id" = ${rnd(100_000)} AND "comments"."created_at" > ${date()} ORDER BY "posts"."published_at" DESC LIMIT 10 OFFSET ${rnd(50) * 10} /*application:Blog,controller:posts,action:index*/`;
    case 2:
      return `SELECT "app_item"."id", "app_item"."name", "app_item"."price", "app_item"."category_id" FROM "app_item" WHERE ("app_item"."category_id" IN (${ints(50)}) AND "app_item"."active" AND "app_item"."price" >= ${rnd(1000)}.${rnd(100)}) ORDER BY "app_item"."name" ASC LIMIT 21`;
    case 3:
      return `/* hibernate: load order */ select o1_0.id,o1_0.customer_id,o1_0.status,o1_0.total,c1_0.id,c1_0.name from orders o1_0 join customers c1_0 on c1_0.id=o1_0.customer_id where o1_0.status=$1 and o1_0.created_at>=$2 order by o1_0.created_at desc fetch first $3 rows only`;
    case 4:
      return `UPDATE "accounts" SET "balance" = ${rnd(100_000)}.${rnd(100)}, "updated_at" = ${date()}, "version" = "version" + 1\n  WHERE "accounts"."id" = ${rnd(1_000_000)} AND "accounts"."version" = ${rnd(50)} -- trace_id=${rnd(1 << 30).toString(16)}\n`;
    default:
      return `INSERT INTO "events" ("kind", "user_id", "payload", "created_at") VALUES ('login', ${rnd(100_000)}, '{"ip": "10.0.${rnd(255)}.${rnd(255)}"}', ${date()}), ('view', ${rnd(100_000)}, '{}', ${date()}) RETURNING "id"`;
  }
}

/** Flat strings made from bytes, as the log parser makes them (not concatenation trees). */
const decoded = (sql: string): string => Buffer.from(sql).toString();
const sets: [string, string[]][] = [
  ['pgbench', Array.from({ length: count }, (_, k) => decoded(pgbench(k)))],
  ['orm mix', Array.from({ length: count / 2 }, (_, k) => decoded(k % 2 === 0 ? pgbench(k >> 1) : orm(k >> 1)))],
];

let sink = 0;
function best(fn: () => void): number {
  let min = Infinity;
  for (let r = 0; r < runs; r++) {
    const started = performance.now();
    fn();
    min = Math.min(min, performance.now() - started);
  }
  return min;
}

for (const [name, sqls] of sets) {
  let bytes = 0;
  for (const s of sqls) bytes += Buffer.byteLength(s);
  const normalizeMs = best(() => {
    for (const s of sqls) sink += normalizeQuery(s).length;
  });
  const templateMs = best(() => {
    const cache = new TemplateCache();
    for (const s of sqls) sink += cache.template(s).fingerprint.length;
  });
  const mbs = (ms: number): string => (bytes / 1e6 / (ms / 1000)).toFixed(0).padStart(5);
  console.log(
    `${name.padEnd(8)} ${String(sqls.length).padStart(8)} statements ${(bytes / 1e6).toFixed(1).padStart(6)} MB | normalizeQuery ${mbs(normalizeMs)} MB/s ${normalizeMs.toFixed(0).padStart(5)} ms | template() ${mbs(templateMs)} MB/s ${templateMs.toFixed(0).padStart(5)} ms | template/normalize ${(templateMs / normalizeMs).toFixed(2)}x`,
  );
}
if (sink === 0) console.log('');
