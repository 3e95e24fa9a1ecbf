/**
 * A module load hook that hands jazzer.js JavaScript instead of TypeScript.
 *
 * jazzer.js instruments ES modules for coverage in its own load hook, but only modules whose
 * format is plain `module`; Node reports a .ts file as `module-typescript` and strips its types
 * after every hook has run, so the project's sources would run uninstrumented. This hook, chained
 * after jazzer's (registered first, by register-strip-types.ts through `node --import`), strips the
 * types itself with Node's own stripper: jazzer.js then sees JavaScript whose positions are those
 * of the source (types are replaced by spaces).
 */
import { type LoadHook, stripTypeScriptTypes } from 'node:module';

export const load: LoadHook = async (url, context, nextLoad) => {
  const result = await nextLoad(url, context);
  if (result.format !== 'module-typescript' || result.source === undefined) return result;
  const source = typeof result.source === 'string' ? result.source : Buffer.from(result.source as Uint8Array).toString('utf8');
  return { ...result, format: 'module', source: stripTypeScriptTypes(source, { mode: 'strip' }) };
};
