/**
 * Running the real helm (and kubectl) against charts/pglog for the chart's tests
 * (helm-chart*.test.ts): the commands with a private helm home, `helm template` parsed into
 * objects, and the namespaces those tests use.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { kubeBin } from '@pglog/test-support/control-plane.ts';
import { parseAllDocuments } from 'yaml';

export const ROOT = join(import.meta.dirname, '../../..');
export const CHART = join(ROOT, 'charts/pglog');
export const NAMESPACE = 'pglog-system';
/** A second collector namespace, and one the chart was not told about. */
export const OTHER = 'pglog-team-b';
export const OUTSIDE = 'pglog-outside';
export const ALL_ON = ['--set', 'hpa.enabled=true,hpa.customMetric.enabled=true,serviceMonitor.enabled=true,prometheusRule.enabled=true'];

export interface Result {
  code: number;
  stdout: string;
  stderr: string;
}
export interface Obj {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string };
  [k: string]: unknown;
}
export interface Rule {
  apiGroups?: string[];
  resources?: string[];
  verbs: string[];
  resourceNames?: string[];
  nonResourceURLs?: string[];
}
export interface PodTemplate {
  metadata?: { labels?: Record<string, string> };
  spec: { containers: Array<{ args?: string[]; env?: Array<{ name: string }> }> };
}

export function run(command: string, args: readonly string[], stdin = '', env?: NodeJS.ProcessEnv): Promise<Result> {
  return new Promise((resolve) => {
    const child = execFile(command, args, { maxBuffer: 64 * 1024 * 1024, ...(env === undefined ? {} : { env }) });
    let stdout = '';
    let stderr = '';
    child.stdout!.on('data', (b: Buffer) => {
      stdout += b.toString();
    });
    child.stderr!.on('data', (b: Buffer) => {
      stderr += b.toString();
    });
    child.on('close', (code) => resolve({ code: code ?? -1, stdout, stderr }));
    // A command that exits without reading its input (helm, diff) must not fail the write.
    child.stdin!.on('error', () => {});
    child.stdin!.end(stdin);
  });
}

// helm's cache, config and data in a private directory: nothing of the user's is read or written.
export const HELM_HOME = mkdtempSync(join(tmpdir(), 'pglog-helm-'));
export const HELM_ENV = {
  ...process.env,
  HELM_CACHE_HOME: join(HELM_HOME, 'cache'),
  HELM_CONFIG_HOME: join(HELM_HOME, 'config'),
  HELM_DATA_HOME: join(HELM_HOME, 'data'),
};
export const helm = (args: readonly string[]): Promise<Result> => run(join(kubeBin(), 'helm'), args, '', HELM_ENV);

export async function render(extra: readonly string[] = []): Promise<{ text: string; objects: Obj[] }> {
  const r = await helm(['template', 'pglog', CHART, '--namespace', NAMESPACE, ...extra]);
  assert.equal(r.code, 0, r.stderr);
  const objects = parseAllDocuments(r.stdout)
    .map((d) => d.toJS() as Obj | null)
    .filter((o): o is Obj => o !== null);
  return { text: r.stdout, objects };
}

export const toYaml = (objects: readonly Obj[]): string => objects.map((o) => JSON.stringify(o)).join('\n---\n');
