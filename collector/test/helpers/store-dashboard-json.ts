/**
 * The chart's store dashboard (charts/pglog/dashboards/pglog-store.json) as the store tests
 * read it: the parts of Grafana's dashboard JSON they look at, each field as optional as the
 * file may leave it (the unit test checks they are there), and the file itself.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

import { STORE_DASHBOARD_FILE } from '../../../scripts/dashboards/store-dashboard.ts';

export interface DashboardTarget {
  datasource?: { type?: string; uid?: string };
  rawSql?: string;
  format?: string;
  rawQuery?: boolean;
  editorMode?: string;
}

export interface DashboardPanel {
  id: number;
  type: string;
  title?: string;
  description?: string;
  datasource?: { type?: string; uid?: string };
  gridPos: { x: number; y: number; w: number; h: number };
  targets?: DashboardTarget[];
}

export interface DashboardVariable {
  name: string;
  type: string;
  query: string;
  multi?: boolean;
  includeAll?: boolean;
  allValue?: string;
  datasource?: { type?: string; uid?: string };
}

export interface StoreDashboard {
  uid: string;
  panels: DashboardPanel[];
  templating: { list: DashboardVariable[] };
}

/** The file as the repository has it now. */
export function readStoreDashboard(): StoreDashboard {
  return JSON.parse(readFileSync(join(import.meta.dirname, '../../..', STORE_DASHBOARD_FILE), 'utf8')) as StoreDashboard;
}
