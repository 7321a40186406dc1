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
  {
    // Model text and tool output are untrusted: the CLI prints only through render.ts's write(),
    // which lets no escape sequence but the renderer's own colours reach the terminal.
    files: ['src/cli/**/*.ts'],
    ignores: ['src/cli/render.ts'],
    rules: {
      'no-restricted-syntax': [
        'error',
        {
          selector: "CallExpression[callee.property.name='write']",
          message:
            'Print through write() from src/cli/render.ts (untrusted text must not reach the terminal raw).',
        },
        {
          selector: "MemberExpression[object.name='console']",
          message:
            'Print through write() from src/cli/render.ts (untrusted text must not reach the terminal raw).',
        },
      ],
    },
  },
);
