/**
 * The control boundaries of a turn workflow: where a requested pause stops the turn, where
 * accepted steering is written, and the last boundary before the output.
 */
import { condition, upsertSearchAttributes } from '@temporalio/workflow';
import { TURNKIT_STATUS } from './contract.js';
import type { TurnRun } from './turn-run.js';
import { runStoreStep } from './turn-run.js';
import type { TurnDigest } from '../contract/digests.js';

/**
 * A control boundary (before a model call, before a tool call): a requested pause stops the
 * turn here, `paused` with its claim cleared, until `resume` (or a cancel, or the root
 * timeout). Returns the digest it resumed from, or null when there was no pause.
 */
export async function pauseAtBoundary(run: TurnRun): Promise<TurnDigest | null> {
  const controls = run.controls;
  if (!controls?.pauseRequested) return null;
  const { store } = run.activities;
  await runStoreStep(() => store.pauseTurn.executeWithOptions({ summary: 'pause' }, [run.owner()]));
  controls.paused = true;
  upsertSearchAttributes([{ key: TURNKIT_STATUS, value: 'paused' }]);
  run.console.update({ status: 'paused', lastStep: 'paused by a person' });
  run.deadline.arm();
  await condition(() => !controls.pauseRequested);
  controls.paused = false;
  const digest = await runStoreStep(() =>
    store.resumePausedTurn.executeWithOptions({ summary: 'resume' }, [run.owner()]),
  );
  upsertSearchAttributes([{ key: TURNKIT_STATUS, value: 'running' }]);
  run.console.digest(digest);
  run.console.update({ lastStep: 'resumed' });
  return digest;
}

/**
 * The boundary before the output (its checks and the output step), the last one of a turn.
 * Pause and steer Updates accepted before it and still being authorized are waited for, then
 * a pause stops the turn here; with steering to apply it returns true (the caller applies it
 * and the model answers again). Otherwise the turn commits to its output: from here on pause
 * and steer are refused (`too_late`) by their validators, so none is acknowledged and dropped.
 */
export async function commitToOutput(run: TurnRun): Promise<boolean> {
  const controls = run.controls;
  if (!controls) return false;
  for (;;) {
    if (controls.authorizing > 0) {
      run.deadline.arm();
      await condition(() => controls.authorizing === 0);
    }
    // While paused, more controls may arrive: look again after the resume.
    if (!(await pauseAtBoundary(run))) break;
  }
  if (controls.steers.length > 0) return true;
  controls.finishing = true;
  return false;
}

/** The output step went back to the model (a revision): pause and steer apply again. */
export function reopenControls(run: TurnRun): void {
  if (run.controls) run.controls.finishing = false;
}

/** Steering accepted and not yet written: it applies at this boundary (back to the model). */
export async function steerAtBoundary(run: TurnRun): Promise<TurnDigest | null> {
  const controls = run.controls;
  if (!controls || controls.steers.length === 0) return null;
  const steers = [...controls.steers];
  const digest = await runStoreStep(() =>
    run.activities.store.steerTurn.executeWithOptions({ summary: 'steer' }, [{ ...run.owner(), steers }]),
  );
  controls.steers = controls.steers.slice(steers.length);
  controls.phaseCalls = new Set();
  run.console.digest(digest);
  run.console.update({ lastStep: 'steered by a person' });
  return digest;
}
