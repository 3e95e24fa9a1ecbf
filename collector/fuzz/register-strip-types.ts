// `node --import ./collector/fuzz/register-strip-types.ts`: registers strip-types-hooks.ts
// before jazzer.js registers its instrumenting hook (see there).
import { register } from 'node:module';

register('./strip-types-hooks.ts', import.meta.url);
