// Builders of Grafana dashboard JSON for the chart's store dashboard (scripts/gen-dashboards.ts
// writes charts/pglog/dashboards/pglog-store.json from them). Pure: objects in, objects out.
//
// Every panel queries the PostgreSQL data source the user picks in the `datasource` variable
// (plugin id `grafana-postgresql-datasource`, Grafana 10.2.3 and later; `postgres` before),
// with raw SQL in code mode; a row repeated by that variable runs its panels once per store. Time series queries return a `time` column first and are sorted
// by it, as Grafana's SQL data sources require; a text column `metric` names the series.

export const DATASOURCE_TYPE = 'grafana-postgresql-datasource';
export const DATASOURCE = { type: DATASOURCE_TYPE, uid: '${datasource}' } as const;

export interface GridPos {
  x: number;
  y: number;
  w: number;
  h: number;
}

export interface PanelSpec {
  title: string;
  description: string;
  /** Raw SQL; Grafana expands its macros and the dashboard's variables. */
  sql: string;
  /** Grid width (of 24) and height; rows are laid out left to right. */
  w: number;
  h: number;
  unit?: string;
  /** Field overrides by name: unit, display name, and a link from each cell (Grafana data link URL). */
  fields?: Record<string, { unit?: string; displayName?: string; link?: { title: string; url: string } }>;
}

export type Panel = Record<string, unknown> & { id: number; type: string; title: string; gridPos: GridPos };

/** Field overrides that set only a unit: `units({ total_ms: 'ms' })` is `{ total_ms: { unit: 'ms' } }`. */
export function units(byField: Record<string, string>): NonNullable<PanelSpec['fields']> {
  return Object.fromEntries(Object.entries(byField).map(([name, unit]) => [name, { unit }]));
}

function target(sql: string, format: 'time_series' | 'table'): Record<string, unknown> {
  return { datasource: DATASOURCE, refId: 'A', editorMode: 'code', format, rawQuery: true, rawSql: sql };
}

function fieldConfig(spec: PanelSpec, defaults: Record<string, unknown> = {}): Record<string, unknown> {
  const overrides = Object.entries(spec.fields ?? {}).map(([name, f]) => ({
    matcher: { id: 'byName', options: name },
    properties: [
      ...(f.unit === undefined ? [] : [{ id: 'unit', value: f.unit }]),
      ...(f.displayName === undefined ? [] : [{ id: 'displayName', value: f.displayName }]),
      ...(f.link === undefined ? [] : [{ id: 'links', value: [f.link] }]),
    ],
  }));
  return { defaults: { ...defaults, ...(spec.unit === undefined ? {} : { unit: spec.unit }) }, overrides };
}

/** A panel of `type`: the spec's title, description and query (as `format`), field defaults and options. */
function panel(
  type: string,
  spec: PanelSpec,
  fieldDefaults: Record<string, unknown>,
  options: Record<string, unknown>,
  format: 'time_series' | 'table' = 'table',
): Omit<Panel, 'id' | 'gridPos'> {
  return {
    type,
    title: spec.title,
    description: spec.description,
    datasource: DATASOURCE,
    fieldConfig: fieldConfig(spec, fieldDefaults),
    options,
    targets: [target(spec.sql, format)],
    w: spec.w,
    h: spec.h,
  };
}

/** A time series: the query returns time, then values (and optionally `metric`). */
export function timeseries(spec: PanelSpec & { stack?: boolean; bars?: boolean }): Omit<Panel, 'id' | 'gridPos'> {
  const custom: Record<string, unknown> = {
    drawStyle: spec.bars === true ? 'bars' : 'line',
    fillOpacity: spec.bars === true ? 80 : 10,
    spanNulls: false,
    showPoints: 'auto',
  };
  if (spec.stack === true) custom['stacking'] = { mode: 'normal', group: 'A' };
  const options = { legend: { displayMode: 'table', placement: 'bottom', calcs: ['max', 'mean'] }, tooltip: { mode: 'multi', sort: 'desc' } };
  return panel('timeseries', spec, { custom }, options, 'time_series');
}

/** A table, sorted as the query sorts it (the reader may sort by any column). */
export function table(spec: PanelSpec): Omit<Panel, 'id' | 'gridPos'> {
  const custom = { align: 'auto', cellOptions: { type: 'auto' }, inspect: true };
  return panel('table', spec, { custom }, { showHeader: true, cellHeight: 'sm', footer: { show: false, reducer: ['sum'], countRows: false } });
}

/** Stat tiles: one query returning one row, a tile per numeric column. */
export function stat(spec: PanelSpec): Omit<Panel, 'id' | 'gridPos'> {
  const options = {
    reduceOptions: { values: false, calcs: ['lastNotNull'], fields: '' },
    orientation: 'auto',
    textMode: 'value_and_name',
    colorMode: 'none',
    graphMode: 'none',
    justifyMode: 'auto',
  };
  return panel('stat', spec, { decimals: 2 }, options);
}

export interface Section {
  title: string;
  panels: Array<Omit<Panel, 'id' | 'gridPos'>>;
}

/**
 * A row repeated for each value of a multi-value variable: Grafana clones the row and the
 * panels under it once per value chosen, each clone with the variable set to its one value
 * (so `${datasource}` in a clone's panels is that clone's data source), `title` after the
 * section's title naming the value.
 */
export interface RowRepeat {
  variable: string;
  title: string;
}

/**
 * Rows of panels, laid out on Grafana's 24-column grid, numbered from 1; each row expanded,
 * its panels the ones after it until the next row (Grafana's model of an expanded row), and
 * repeated by `repeat` when given.
 */
export function layout(sections: readonly Section[], repeat?: RowRepeat): Panel[] {
  const out: Panel[] = [];
  let id = 1;
  let y = 0;
  for (const section of sections) {
    const row = { id: id++, type: 'row', title: section.title, collapsed: false, panels: [], gridPos: { x: 0, y, w: 24, h: 1 } };
    out.push(repeat === undefined ? row : { ...row, title: `${section.title}${repeat.title}`, repeat: repeat.variable });
    y += 1;
    let x = 0;
    let rowHeight = 0;
    for (const panel of section.panels) {
      const { w, h, ...rest } = panel as Omit<Panel, 'id' | 'gridPos'> & { w: number; h: number };
      if (x + w > 24) {
        y += rowHeight;
        x = 0;
        rowHeight = 0;
      }
      out.push({ ...rest, id: id++, gridPos: { x, y, w, h } } as Panel);
      x += w;
      rowHeight = Math.max(rowHeight, h);
    }
    y += rowHeight;
  }
  return out;
}

/** A query variable over the store: multi-value, with All as a custom all value. */
export function queryVariable(name: string, label: string, description: string, sql: string, allValue: string): Record<string, unknown> {
  return {
    name,
    label,
    description,
    type: 'query',
    datasource: DATASOURCE,
    query: sql,
    definition: sql,
    refresh: 2, // on time range change
    sort: 1,
    multi: true,
    includeAll: true,
    allValue,
    current: { selected: true, text: ['All'], value: ['$__all'] },
    options: [],
  };
}

/** A free-text variable (Grafana inserts it as typed; queries quote it with ${name:sqlstring}). */
export function textboxVariable(name: string, label: string, description: string): Record<string, unknown> {
  return { name, label, description, type: 'textbox', query: '', current: { selected: false, text: '', value: '' }, options: [] };
}
