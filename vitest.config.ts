import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts', 'src/**/*.test.ts'],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    // Temporal workers and SQLite child processes are heavy on a 2-core machine.
    fileParallelism: true,
    maxWorkers: 2,
    // .ci/run reads the counts from this report; TURNKIT_JSON_REPORT asks for it outside CI.
    reporters:
      process.env.CI || process.env.TURNKIT_JSON_REPORT
        ? ['default', ['json', { outputFile: 'test-results/results.json' }]]
        : ['default'],
  },
});
