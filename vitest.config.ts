import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts', 'src/**/*.test.ts'],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    // Temporal workers and SQLite child processes are heavy on a 2-core machine.
    fileParallelism: true,
    maxWorkers: 2,
    reporters: process.env.CI
      ? ['default', ['json', { outputFile: 'test-results/results.json' }]]
      : ['default'],
  },
});
