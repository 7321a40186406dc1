/**
 * Issue 45, the first hour: a provider that keeps failing logs one line per retry (the
 * activity, its attempt, the workflow, the error and its new causes), and its stack only at
 * DEBUG, where the report counted about 280 lines of stack traces for five attempts.
 */
import { PassThrough } from 'node:stream';
import { ApplicationFailure } from '@temporalio/common';
import { describe, expect, it } from 'vitest';
import { conciseWorkerLogger } from '../../src/worker.js';

function logged(level: 'WARN' | 'DEBUG'): string {
  const out = new PassThrough();
  const logger = conciseWorkerLogger(level, out);
  const error = ApplicationFailure.create({
    type: 'ModelError',
    message: 'provider error: Cannot connect to API: getaddrinfo ENOTFOUND api.openai.com',
    cause: new Error('Cannot connect to API: getaddrinfo ENOTFOUND api.openai.com'),
  });
  for (const attempt of [1, 2, 3, 4, 5])
    logger.warn('Activity failed', {
      error,
      durationMs: 12,
      activityType: 'modelStep',
      attempt,
      workflowType: 'turnWorkflow',
      workflowId: 'turnkit-turn-turn_1',
    });
  logger.info('Worker state changed', { state: 'RUNNING' });
  return String(out.read() ?? '');
}

describe('first hour: worker logs', () => {
  it('first hour: five failed provider attempts are five one-line warnings; nothing below the level', () => {
    const lines = logged('WARN').trimEnd().split('\n');
    expect(lines).toHaveLength(5);
    expect(lines[1]).toMatch(
      /^\S+Z \[WARN\] Activity failed \(modelStep attempt 2, turnWorkflow turnkit-turn-turn_1\): ModelError: provider error: Cannot connect to API: getaddrinfo ENOTFOUND api\.openai\.com$/,
    );
  });

  it('first hour: at DEBUG each entry carries its attributes and the stack', () => {
    const text = logged('DEBUG');
    expect(text).toContain('{"durationMs":12}\nApplicationFailure: provider error');
    expect(text).toMatch(/\n\s+at /);
    expect(text).toContain('[INFO] Worker state changed {"state":"RUNNING"}');
  });
});
