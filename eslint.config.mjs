// ESLint flat config: typescript-eslint with type information, so promise misuse is caught.
import js from '@eslint/js';
import regexp from 'eslint-plugin-regexp';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['**/node_modules/**', '.tools/**', 'tmp/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  regexp.configs['flat/recommended'],
  {
    rules: {
      // Any database role can write any text into the log we parse: a regex that backtracks
      // super-linearly stalls every target of the process (security review F1). The plugin
      // does not see every such pattern (a repeated literal before [^.]* was one), so
      // collector/test/unit/parser-linear-time.test.ts measures the parsers as well.
      'regexp/no-super-linear-backtracking': 'error',
      // ignorePartial: false also checks regexes used on a part of a string (matchAll, replace).
      'regexp/no-super-linear-move': ['error', { ignorePartial: false }],
      // Style only, and they would trade an explicit ASCII class for \w or the i flag, which with
      // the u flag also match non-ASCII letters (the Kelvin sign, the long s).
      'regexp/prefer-w': 'off',
      'regexp/use-ignore-case': 'off',
    },
  },
  {
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      // Fire-and-forget promises leaked memory in production Node services.
      '@typescript-eslint/no-floating-promises': ['error', {
        // node:test's test()/describe() return promises the runner itself awaits.
        allowForKnownSafeCalls: [{ from: 'package', package: 'node:test', name: ['test', 'it', 'describe', 'suite', 'before', 'after', 'beforeEach', 'afterEach'] }],
      }],
      '@typescript-eslint/no-misused-promises': 'error',
      '@typescript-eslint/await-thenable': 'error',
      '@typescript-eslint/switch-exhaustiveness-check': 'error',
      '@typescript-eslint/consistent-type-imports': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      // Configuration is parsed once at the entry point and passed down.
      'no-restricted-properties': ['error', { object: 'process', property: 'env', message: 'Read process.env only in an entry point (src/cli/main.ts, bench/, tests) and pass configuration down.' }],
    },
  },
  {
    files: ['**/*.mjs', '**/*.js'],
    ...tseslint.configs.disableTypeChecked,
  },
  {
    // Entry points: the only places allowed to read the environment.
    files: ['collector/src/cli/main.ts', 'bench/**/*.ts', 'collector/test/**/*.ts', 'operator/test/**/*.ts', 'scripts/**/*.ts'],
    rules: { 'no-restricted-properties': 'off' },
  },
);
