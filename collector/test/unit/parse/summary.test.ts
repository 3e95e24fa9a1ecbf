// The `pglog parse --summary` builder, fed statement events made by the real EventParser:
// templates aggregated by fingerprint and sorted by total time, and past maxTemplates new ones
// sharing one overflow entry so memory stays bounded.
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { Decoder } from '../../../src/logformat/decode.ts';
import { EventParser } from '../../../src/logformat/event-parser.ts';
import { ZERO_COUNTERS } from '../../../src/logformat/log-parser.ts';
import { emptyRecord } from '../../../src/logformat/record.ts';
import { OVERFLOW_FINGERPRINT, SummaryBuilder } from '../../../src/parse/summary.ts';

const parser = new EventParser({ decoder: new Decoder({ defaultEncoding: 'UTF8', databases: {} }) });
const statement = (sql: string, ms: number) => parser.parse(emptyRecord(0, 1, 'LOG', Buffer.from(`duration: ${ms.toFixed(3)} ms  statement: ${sql}`)));

test('templates are aggregated by fingerprint and sorted by total time', () => {
  const s = new SummaryBuilder();
  s.add(statement('SELECT * FROM a WHERE id = 1', 1));
  s.add(statement('SELECT * FROM a WHERE id = 2', 3));
  s.add(statement('SELECT * FROM b', 10));
  const { templates, events } = s.build(ZERO_COUNTERS);
  assert.equal(events.statement, 3);
  assert.deepEqual(
    templates.map((t) => [t.query, t.calls, t.total_ms]),
    [
      ['select * from b', 1, 10],
      ['select * from a where id = ?', 2, 4],
    ],
  );
  assert.equal(templates[1]!.mean_ms, 2);
  assert.equal(templates[1]!.stddev_ms, 1);
});

test('beyond the tracked templates, new ones share one overflow entry (bounded memory)', () => {
  const s = new SummaryBuilder({ maxTemplates: 3 });
  for (let i = 0; i < 10; i++) s.add(statement(`SELECT * FROM t${i}`, 1));
  s.add(statement('SELECT * FROM t0', 1));
  const { templates } = s.build(ZERO_COUNTERS);
  assert.equal(templates.length, 4);
  const overflow = templates.find((t) => t.fingerprint === OVERFLOW_FINGERPRINT);
  assert.equal(overflow?.calls, 7);
  assert.equal(templates.find((t) => t.query === 'select * from t0')?.calls, 2);
});
