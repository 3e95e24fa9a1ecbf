// What Grafana sends to a PostgreSQL data source for a panel's raw SQL, so the tests can run the
// store dashboard's queries (charts/pglog/dashboards/pglog-store.json) as Grafana would. Pure.
//
// Two steps, in Grafana's order:
//  1. The browser interpolates template variables ($var, ${var}, ${var:format}, [[var]]) and the
//     global ones ($__interval, $__interval_ms, $__range_s, $__from, $__to). A SQL data source
//     formats a multi-value or include-All variable as quoted literals ('a','b', quotes doubled),
//     a single-value one raw; "All" is the custom all value when one is set (inserted as is,
//     unformatted), else every option.
//     https://grafana.com/docs/grafana/latest/dashboards/variables/variable-syntax/ (formats)
//     https://grafana.com/docs/grafana/latest/datasources/postgres/template-variables/
//  2. The data source's backend expands its macros:
//     https://grafana.com/docs/grafana/latest/datasources/postgres/query-editor/ (Macros):
//       $__time(c)             c AS "time"
//       $__timeEpoch(c)        extract(epoch from c) AS "time"
//       $__timeFilter(c)       c BETWEEN '<from RFC 3339>' AND '<to RFC 3339>'
//       $__timeFrom()          '<from RFC 3339>'          $__timeTo()  '<to RFC 3339>'
//       $__timeGroup(c, '5m')  (extract(epoch from c)/300)::bigint*300  (a fill mode may follow)
//       $__timeGroupAlias(c, '5m')   the same AS "time"
//       $__unixEpochFilter(c)  c >= <from s> AND c <= <to s>
//       $__unixEpochFrom()     <from s>                   $__unixEpochTo()  <to s>
//       $__unixEpochGroup(c, '5m')   floor(c/300)*300  ($__unixEpochGroupAlias: AS "time")
// A macro this module does not know throws, as Grafana answers an unknown macro with an error.

export interface GrafanaVariable {
  name: string;
  multi: boolean;
  includeAll: boolean;
  /** The custom all value (e.g. `'__all'`), or null: "All" then means every option. */
  allValue: string | null;
  /** The variable's options (what its query returned), without "All". */
  options: readonly string[];
  /** The selection: some options, or every one ("All"). */
  current: readonly string[] | 'all';
}

export interface GrafanaQueryContext {
  from: Date;
  to: Date;
  /** $__interval in milliseconds (Grafana: the range over the panel's max data points, rounded). */
  intervalMs: number;
  variables: readonly GrafanaVariable[];
}

/** Grafana's interval text: 500ms, 15s, 5m, 2h, 1d (the largest unit that divides it). */
export function formatInterval(ms: number): string {
  if (!Number.isInteger(ms) || ms <= 0) throw new Error(`interval must be a positive whole number of ms, got ${ms}`);
  for (const [unit, size] of [
    ['d', 86_400_000],
    ['h', 3_600_000],
    ['m', 60_000],
    ['s', 1000],
  ] as const) {
    if (ms % size === 0) return `${ms / size}${unit}`;
  }
  return `${ms}ms`;
}

/** An interval argument of a macro ('5m', 5m, 10s, 500ms) in seconds. */
export function parseIntervalSeconds(text: string): number {
  const m = /^'?\s*(\d+(?:\.\d+)?)(ms|[dhmsw])\s*'?$/.exec(text.trim());
  if (m === null) throw new Error(`not an interval: ${text}`);
  const factor = { ms: 0.001, s: 1, m: 60, h: 3600, d: 86_400, w: 604_800 }[m[2] as 'ms' | 's' | 'm' | 'h' | 'd' | 'w'];
  return Number(m[1]) * factor;
}

const quoteLiteral = (v: string): string => `'${v.replaceAll("'", "''")}'`;

/** One variable's text for a format (null: the data source's default for SQL). */
function formatVariable(v: GrafanaVariable, format: string | null): string {
  if (v.current === 'all' && v.allValue !== null && format !== 'text') return v.allValue;
  const values = v.current === 'all' ? v.options : v.current;
  switch (format) {
    case null:
      // SQL data sources quote every value of a multi-value or include-All variable.
      return v.multi || v.includeAll ? values.map(quoteLiteral).join(',') : values.join(',');
    case 'sqlstring':
      return values.map(quoteLiteral).join(',');
    case 'singlequote':
      return values.map((x) => `'${x.replaceAll("'", "\\'")}'`).join(',');
    case 'doublequote':
      return values.map((x) => `"${x.replaceAll('"', '\\"')}"`).join(',');
    case 'csv':
    case 'raw':
      return values.join(',');
    case 'pipe':
      return values.join('|');
    case 'text':
      return v.current === 'all' ? 'All' : values.join(' + ');
    default:
      throw new Error(`variable ${v.name}: format ${format} is not supported here`);
  }
}

/** Step 1: template variables and the global interval and range variables. */
export function interpolateVariables(sql: string, ctx: GrafanaQueryContext): string {
  const byName = new Map(ctx.variables.map((v) => [v.name, v]));
  const globals: Record<string, string> = {
    __interval: formatInterval(ctx.intervalMs),
    __interval_ms: String(ctx.intervalMs),
    __range_s: String(Math.round((ctx.to.getTime() - ctx.from.getTime()) / 1000)),
    __from: String(ctx.from.getTime()),
    __to: String(ctx.to.getTime()),
  };
  const value = (name: string, format: string | null, whole: string): string => {
    const v = byName.get(name);
    if (v !== undefined) return formatVariable(v, format);
    // Unknown names ($__timeFilter, a macro) are left for the backend, as Grafana leaves them.
    return globals[name] ?? whole;
  };
  return sql.replace(
    /\$(\w+)|\[\[(\w+)(?::(\w+))?\]\]|\$\{(\w+)(?::([^}]+))?\}/g,
    (whole, plain?: string, bracket?: string, bracketFormat?: string, braced?: string, bracedFormat?: string) => {
      if (plain !== undefined) return value(plain, null, whole);
      if (bracket !== undefined) return value(bracket, bracketFormat ?? null, whole);
      return value(braced!, bracedFormat ?? null, whole);
    },
  );
}

/** Step 2: the PostgreSQL data source's macros. */
export function expandMacros(sql: string, ctx: Pick<GrafanaQueryContext, 'from' | 'to'>): string {
  const from = `'${ctx.from.toISOString()}'`;
  const to = `'${ctx.to.toISOString()}'`;
  const fromS = Math.floor(ctx.from.getTime() / 1000);
  const toS = Math.floor(ctx.to.getTime() / 1000);
  return sql.replace(/\$__(\w+)\(([^()]*)\)/g, (_whole, name: string, argText: string) => {
    const args = argText.trim() === '' ? [] : argText.split(',').map((a) => a.trim());
    const need = (n: number): void => {
      if (args.length < n) throw new Error(`macro $__${name} needs ${n} argument(s), got ${JSON.stringify(argText)}`);
    };
    const group = (column: string, interval: string): string => {
      const s = parseIntervalSeconds(interval);
      return `(extract(epoch from ${column})/${s})::bigint*${s}`;
    };
    switch (name) {
      case 'time':
        need(1);
        return `${args[0]} AS "time"`;
      case 'timeEpoch':
        need(1);
        return `extract(epoch from ${args[0]}) AS "time"`;
      case 'timeFilter':
        need(1);
        return `${args[0]} BETWEEN ${from} AND ${to}`;
      case 'timeFrom':
        return from;
      case 'timeTo':
        return to;
      case 'timeGroup':
        need(2);
        return group(args[0]!, args[1]!);
      case 'timeGroupAlias':
        need(2);
        return `${group(args[0]!, args[1]!)} AS "time"`;
      case 'unixEpochFilter':
        need(1);
        return `${args[0]} >= ${fromS} AND ${args[0]} <= ${toS}`;
      case 'unixEpochFrom':
        return String(fromS);
      case 'unixEpochTo':
        return String(toS);
      case 'unixEpochGroup':
        need(2);
        {
          const s = parseIntervalSeconds(args[1]!);
          return `floor(${args[0]}/${s})*${s}`;
        }
      case 'unixEpochGroupAlias':
        need(2);
        {
          const s = parseIntervalSeconds(args[1]!);
          return `floor(${args[0]}/${s})*${s} AS "time"`;
        }
      default:
        throw new Error(`unknown macro $__${name}`);
    }
  });
}

/** The SQL Grafana runs for a panel's rawSql: variables, then macros. */
export function grafanaSql(rawSql: string, ctx: GrafanaQueryContext): string {
  return expandMacros(interpolateVariables(rawSql, ctx), ctx);
}
