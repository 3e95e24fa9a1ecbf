// helm for tests: its cache, config and data in a directory of the test's own, so that nothing
// of the user's helm set-up is read or written.
import { join } from 'node:path';

/** This process's environment with helm's cache, config and data homes under `home`. */
export function privateHelmEnv(home: string): NodeJS.ProcessEnv {
  return {
    ...process.env,
    HELM_CACHE_HOME: join(home, 'cache'),
    HELM_CONFIG_HOME: join(home, 'config'),
    HELM_DATA_HOME: join(home, 'data'),
  };
}
