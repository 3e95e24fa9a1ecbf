/**
 * `pglog crds apply`: puts pglog's CustomResourceDefinitions, as a chart ships them, into the
 * cluster with server-side apply, and waits until the API server serves them. The Helm chart
 * runs it in a pre-install/pre-upgrade hook Job (ADR 0013): Helm installs a chart's crds/
 * on the first install only, so without it `helm upgrade` would keep the old schemas and the
 * API server would prune every new field from the objects users apply.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Writable } from 'node:stream';

import { PglogError } from '@pglog/common/errors.ts';
import { createKubeClient } from '@pglog/common/kube/client.ts';
import type { KubeClient, KubeObject } from '@pglog/common/kube/client-types.ts';
import { type KubeAccess, loadKubeAccess, parseKubeAccess } from '@pglog/common/kube/kube-access.ts';
import { CUSTOM_RESOURCE_DEFINITIONS as CRDS } from '@pglog/common/kube/resources.ts';
import { BUILT_IN_CRD_DIGESTS } from '@pglog/operator/crd/built-in-crds.ts';
import { crdDigest } from '@pglog/operator/crd/crd-digest.ts';
import { parseAllDocuments } from 'yaml';

import { parseCommandArgs, stringOptions } from './command-args.ts';

export const CRDS_USAGE = `usage: pglog crds apply --dir DIR [OPTIONS]
  Applies the CustomResourceDefinitions in DIR's *.yaml files (pglog's own, *.pglog.io, each
  exactly as this version of pglog generates it, and no others) with server-side apply, then
  waits until each is Established. The chart's pre-install/pre-upgrade hook runs it, so
  \`helm upgrade\` brings the CRDs of the new chart.
  --dir DIR                 the CRD files (the chart mounts its crds/ there from a ConfigMap)
  --kubeconfig PATH         kubeconfig file (default: the files of KUBECONFIG, merged; else in a
                            pod its service account; else ~/.kube/config)
  --context NAME            the kubeconfig context to use (default: its current-context)`;

/** Field manager of the applied CRDs: later applies of a newer chart own and change the same fields. */
export const CRDS_FIELD_MANAGER = 'pglog-crds';

export interface CrdsCommandConfig {
  dir: string;
  kube: KubeAccess;
}

export function parseCrdsArgs(argv: string[], env: NodeJS.ProcessEnv): CrdsCommandConfig {
  const [sub, ...rest] = argv;
  if (sub !== 'apply') throw new PglogError('USAGE', `crds: unknown subcommand '${sub ?? ''}'\n${CRDS_USAGE}`);
  const { values } = parseCommandArgs(
    {
      args: rest,
      allowPositionals: false,
      options: stringOptions('dir', 'kubeconfig', 'context'),
    },
    (message) => `crds: ${message}`,
  );
  if (values.dir === undefined || values.dir === '') throw new PglogError('USAGE', 'crds apply: --dir DIR is required');
  return { dir: values.dir, kube: parseKubeAccess('crds', values.kubeconfig, values.context, env) };
}

type Crd = KubeObject & { spec: { group: string; conversion?: { strategy?: string; webhook?: unknown } } };

/**
 * Refuses a pglog CRD that is not the one this version generates (security review R9). The
 * files come from a ConfigMap in the release namespace, which whoever may edit ConfigMaps
 * there could change before the hook's pod mounts it; the hook's account may patch the CRDs
 * cluster-wide. A `spec.conversion` webhook would have the API server send every pool and
 * target, as it is read and written, to a server of the editor's choosing and store what it
 * answers; a changed schema could default a field (`sql.allowSuperuser`) or drop a
 * validation. So a CRD is applied only when its digest is the one built into the image.
 */
function assertBuiltIn(crd: Crd, file: string): void {
  const name = crd.metadata.name;
  const conversion = crd.spec.conversion;
  if (conversion !== undefined && (conversion.strategy !== 'None' || conversion.webhook !== undefined)) {
    throw new PglogError(
      'USAGE',
      `crds apply: ${file}: ${name} has spec.conversion (strategy ${conversion.strategy ?? '?'}${conversion.webhook === undefined ? '' : ', a webhook'}): ` +
        "pglog's CRDs have none; refused (the ConfigMap the chart mounts may have been edited)",
    );
  }
  const wanted = Object.hasOwn(BUILT_IN_CRD_DIGESTS, name) ? BUILT_IN_CRD_DIGESTS[name] : undefined;
  if (wanted === undefined) throw new PglogError('USAGE', `crds apply: ${file}: ${name} is not one of pglog's CustomResourceDefinitions; refused`);
  if (crdDigest(crd) !== wanted) {
    throw new PglogError(
      'USAGE',
      `crds apply: ${file}: ${name} differs from the CustomResourceDefinition this version of pglog generates; refused. ` +
        'Use the chart of the same version as the image (the hook applies only the CRDs built into its image); ' +
        'if the chart is that version, the ConfigMap it mounts may have been edited',
    );
  }
}

/**
 * The CRDs of the files in `dir`, in file-name order. Names starting with '.' are skipped (a
 * mounted ConfigMap's `..data` links). Anything but a pglog.io CRD is refused, and so is a
 * pglog CRD other than this version's (assertBuiltIn): the hook may change pglog's CRDs, to
 * what this version defines, and nothing else in the cluster.
 */
export function readCrds(dir: string): Crd[] {
  const files = readdirSync(dir)
    .filter((f) => !f.startsWith('.') && /\.ya?ml$/.test(f))
    .sort();
  const crds: Crd[] = [];
  for (const file of files) {
    for (const doc of parseAllDocuments(readFileSync(join(dir, file), 'utf8'))) {
      if (doc.errors.length > 0) throw new PglogError('USAGE', `crds apply: ${file}: ${doc.errors[0]!.message}`);
      const obj = doc.toJS() as Crd | null;
      if (obj === null) continue;
      const name = obj.metadata?.name ?? '';
      if (
        obj.apiVersion !== 'apiextensions.k8s.io/v1' ||
        obj.kind !== 'CustomResourceDefinition' ||
        !name.endsWith('.pglog.io') ||
        obj.spec?.group !== 'pglog.io'
      ) {
        throw new PglogError(
          'USAGE',
          `crds apply: ${file}: only pglog.io CustomResourceDefinitions (apiextensions.k8s.io/v1) are applied, found ${obj.kind ?? '?'} ${name}`,
        );
      }
      assertBuiltIn(obj, file);
      crds.push(obj);
    }
  }
  if (crds.length === 0) throw new PglogError('USAGE', `crds apply: no CustomResourceDefinition in ${dir}`);
  return crds;
}

interface CrdStatus {
  conditions?: Array<{ type: string; status: string; message?: string }>;
}

/** Applies each CRD, then waits until all are Established (new names accepted, new schema served). */
export async function applyCrds(client: KubeClient, crds: readonly Crd[], out: Writable, pollMs = 500): Promise<void> {
  for (const crd of crds) {
    await client.apply(CRDS, crd, { fieldManager: CRDS_FIELD_MANAGER, force: true });
    out.write(`applied customresourcedefinition ${crd.metadata.name}\n`);
  }
  for (const crd of crds) {
    for (;;) {
      const now = await client.get<KubeObject & { status?: CrdStatus }>(CRDS, undefined, crd.metadata.name);
      const conditions = now?.status?.conditions ?? [];
      const refused = conditions.find((c) => c.type === 'NamesAccepted' && c.status === 'False');
      if (refused !== undefined) throw new PglogError('USAGE', `crds apply: ${crd.metadata.name}: names not accepted: ${refused.message ?? ''}`);
      if (conditions.some((c) => c.type === 'Established' && c.status === 'True')) break;
      await new Promise((r) => setTimeout(r, pollMs));
    }
    out.write(`established customresourcedefinition ${crd.metadata.name}\n`);
  }
}

export async function runCrdsCommand(config: CrdsCommandConfig, out: Writable): Promise<number> {
  const crds = readCrds(config.dir);
  const client = createKubeClient(await loadKubeAccess(config.kube), { userAgent: 'pglog-crds' });
  try {
    await applyCrds(client, crds, out);
  } finally {
    client.close();
  }
  return 0;
}
