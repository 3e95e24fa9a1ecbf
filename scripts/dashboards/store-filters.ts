// The target and database filters every panel of the store dashboard applies. Pure.
//
// Both variables are multi-value with "All" mapped to the custom all value `'__all'` (Grafana
// inserts a custom all value unquoted, as it stands), so "All" filters nothing instead of
// listing every option: fleet-wide panels then read rows whatever their database (NULL for a
// checkpoint or a background worker's line) and the SQL does not grow with the fleet. A
// selection is a list of quoted literals: `'__all' IN ('db1','db2') OR target IN ('db1','db2')`.
// No target is named `__all` (Kubernetes names have no `_`).

export const ALL = "'__all'";

/** `$target` applied to column `col` (default `target`). */
export const byTarget = (col = 'target'): string => `(${ALL} IN ($target) OR ${col} IN ($target))`;

/** `$database` applied to column `col` (default `database`). */
export const byDatabase = (col = 'database'): string => `(${ALL} IN ($database) OR ${col} IN ($database))`;

/** Both, for a view with target and database columns, optionally prefixed by a table alias. */
export const byTargetAndDatabase = (alias = ''): string => `${byTarget(`${alias}target`)} AND ${byDatabase(`${alias}database`)}`;

/** The usual WHERE of a panel: the dashboard's time range on `ts`, and both filters. */
export const inWindow = (alias = ''): string => `$__timeFilter(${alias}ts) AND ${byTargetAndDatabase(alias)}`;
