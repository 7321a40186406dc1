import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/', 'node_modules/', '.temporal/', '.node/', '.node-*/', 'test-results/', 'coverage/'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/consistent-type-imports': 'error',
    },
  },
  {
    files: ['src/workflows/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              group: ['**/store/*', '**/models/*', 'better-sqlite3', 'pg', 'ai', '@ai-sdk/*', 'node:*'],
              message: 'Workflow code must stay deterministic: do I/O in activities.',
            },
            {
              group: ['**/activities/*'],
              message: 'Workflows and activities meet only in src/workflows/contract.ts (no import cycle).',
            },
          ],
        },
      ],
    },
  },
);
