// The fuzz targets of targets.ts as jazzer.js wants them: exported functions of a JavaScript
// module (`jazzer collector/fuzz/jazzer-entry.mjs -f stderr`). See run.ts.
import { TARGETS } from './targets.ts';

export const { stderr, csvlog, jsonlog, syslog, prefix } = TARGETS;
