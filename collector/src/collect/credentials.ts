/**
 * SSH credentials of one target as the collector holds them: the key's bytes, where they came
 * from (for messages), and the known_hosts text. Its own file so the collector and the code
 * that opens a target's transports share the type without importing each other.
 */

/** SSH credentials of one target, read from its files at start-up (or from its Secret). */
export interface TargetCredentials {
  privateKey: Buffer;
  /** Where the key came from (a file path, a Secret), for messages; never the key itself. */
  privateKeySource: string;
  knownHosts: { text: string; source: string };
}
