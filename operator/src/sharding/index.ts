// The sharding package's public surface: the strategies (bounded consistent hashing, the
// modulo baseline), the hash, and the shared types and helpers, so that the controller and the
// tests import from one place rather than from the files behind it.
export {
  type BoundedAssignment,
  boundedConsistentHashing,
  buildRing,
  planBoundedAssignment,
  type Ring,
  ringPosition,
  targetRingPosition,
} from './bounded-consistent-hashing.ts';
export { murmur3 } from './hash.ts';
export { moduloHashing } from './modulo-hashing.ts';
export {
  compareStrings,
  DEFAULT_SHARDING_OPTIONS,
  movedWeight,
  type ShardingInput,
  type ShardingOptions,
  type ShardingStrategy,
  type ShardingTarget,
  shardLoads,
  sortedShards,
  targetWeight,
  targetWeights,
  validateShardingOptions,
} from './types.ts';
