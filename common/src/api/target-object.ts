/**
 * A PostgresTarget as the API server serves it: the collector's PostgresTarget type (shared
 * with the standalone targets file) with the full object metadata (uid, generation,
 * resourceVersion) the operator needs.
 */
import type { ObjectMeta } from './common.ts';
import type { PostgresTarget, TargetMetadata } from './postgres-target.ts';

export type TargetObject = PostgresTarget & { metadata: TargetMetadata & ObjectMeta };
