/**
 * Statement messages of postgres.c (log_statement, log_min_duration_statement, log_duration):
 *
 *   duration: 1.234 ms  statement: SQL            simple protocol, with duration
 *   duration: 1.234 ms  execute <unnamed>: SQL    extended protocol (also `execute S_1: `,
 *                                                 `execute S_1/C_2: `, `execute fetch from S_1/C_2: `)
 *   duration: 1.234 ms  parse <unnamed>: SQL      extended protocol steps (not executions)
 *   duration: 1.234 ms  bind S_1/C_2: SQL
 *   duration: 1.234 ms  plan:\n...                auto_explain (see plan.ts)
 *   duration: 1.234 ms                            log_duration alone
 *   statement: SQL / execute S_1: SQL             log_statement (no duration)
 */
import { num } from './text.ts';

export type StatementMessage =
  | { type: 'statement'; duration: number | null; protocol: 'simple' | 'extended'; name: string | null; query: string }
  | { type: 'step'; step: 'parse' | 'bind'; duration: number | null; name: string; query: string }
  | { type: 'duration'; duration: number }
  | { type: 'plan'; duration: number; body: string };

const DURATION = 'duration: ';

/** `<name>: SQL` (after `execute `, `parse `, `bind `) → name and SQL, or null. */
function nameAndQuery(rest: string): { name: string; query: string } | null {
  const colon = rest.indexOf(': ');
  if (colon === -1) {
    // An empty statement text leaves "execute <unnamed>:" with nothing after the colon.
    if (rest.endsWith(':')) return { name: rest.slice(0, -1), query: '' };
    return null;
  }
  return { name: rest.slice(0, colon), query: rest.slice(colon + 2) };
}

function afterDuration(rest: string, duration: number | null): StatementMessage | null {
  if (rest.startsWith('statement: ')) {
    return { type: 'statement', duration, protocol: 'simple', name: null, query: rest.slice(11) };
  }
  if (rest.startsWith('execute ')) {
    let tail = rest.slice(8);
    if (tail.startsWith('fetch from ')) tail = tail.slice(11);
    const nq = nameAndQuery(tail);
    return nq === null ? null : { type: 'statement', duration, protocol: 'extended', name: nq.name, query: nq.query };
  }
  if (duration !== null && (rest.startsWith('parse ') || rest.startsWith('bind '))) {
    const step = rest.charCodeAt(0) === 112 ? 'parse' : 'bind';
    const nq = nameAndQuery(rest.slice(step.length + 1));
    return nq === null ? null : { type: 'step', step, duration, name: nq.name, query: nq.query };
  }
  if (duration !== null && rest.startsWith('plan:')) {
    const body = rest.charCodeAt(5) === 10 ? rest.slice(6) : rest.slice(5).trimStart();
    return { type: 'plan', duration, body };
  }
  return null;
}

/** Parses a statement/duration message, or returns null when it is none (or is malformed). */
export function parseStatementMessage(message: string): StatementMessage | null {
  if (message.startsWith(DURATION)) {
    const ms = message.indexOf(' ms', DURATION.length);
    if (ms === -1) return null;
    const duration = num(message.slice(DURATION.length, ms));
    if (duration === null || duration < 0) return null;
    const rest = message.slice(ms + 3);
    if (rest === '') return { type: 'duration', duration };
    if (!rest.startsWith('  ')) return null;
    return afterDuration(rest.slice(2), duration);
  }
  return afterDuration(message, null);
}
