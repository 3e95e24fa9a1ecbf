/**
 * Running the real helm (and kubectl) against charts/pglog for the chart's tests
 * (helm-chart*.test.ts): the commands with a private helm home, `helm template` parsed into
 * objects, and the namespaces those tests use.
 */
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { kubeBin } from '@pglog/test-support/control-plane.ts';
import { privateHelmEnv } from '@pglog/test-support/helm.ts';
import { type CommandResult, runCommand } from '@pglog/test-support/run-command.ts';
import { parseAllDocuments } from 'yaml';

export const ROOT = join(import.meta.dirname, '../../..');
export const CHART = join(ROOT, 'charts/pglog');
export const NAMESPACE = 'pglog-system';
/** A second collector namespace, and one the chart was not told about. */
export const OTHER = 'pglog-team-b';
export const OUTSIDE = 'pglog-outside';
export const ALL_ON = ['--set', 'hpa.enabled=true,hpa.customMetric.enabled=true,serviceMonitor.enabled=true,prometheusRule.enabled=true'];

export type Result = CommandResult;
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
  return runCommand(command, args, { stdin, env });
}

// helm's cache, config and data in a private directory: nothing of the user's is read or written.
export const HELM_HOME = mkdtempSync(join(tmpdir(), 'pglog-helm-'));
export const HELM_ENV = privateHelmEnv(HELM_HOME);
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
