import { patched } from '@temporalio/workflow';

/**
 * Patch ids (`patched()`): every change to the command sequence of the released turn workflow
 * is guarded, and CI replays the recorded histories of the earlier version.
 */
export const PATCH_SIGNALLED_WAITS = 'turnkit-signalled-waits-1';
export const PATCH_NOTIFY = 'turnkit-terminal-notice-1';
export const PATCH_COORDINATION = 'turnkit-coordination-tools-1';
export const PATCH_RECLAIM = 'turnkit-reclaim-after-reset-1';
export const PATCH_FAIL_ACTIVITY = 'turnkit-fail-as-activity-1';

// The patches below are decided once, in the run's first activation, before any command
// (`runFeatures`): a `patched()` call right after a local activity's result misreads a
// history in which that local activity outlived its workflow task (the marker and the
// commands after it land in two tasks), and the replay fails (docs/decisions/021-patches-at-run-start.md).

/**
 * Release 0.3's command changes, one marker for all (each marker costs a turn two history
 * events): a model phase asks whether compaction is due and runs `compactStep` first when it
 * is; output constraints and judges run in their own scheduled activity before the output step.
 */
const PATCH_0_3 = 'turnkit-0.3-compaction-output-audit';

/**
 * Release 0.4's command changes, one marker for all: a person in the loop (Updates `approve`,
 * `reject`, `pause`, `resume`, `steer`; calls awaiting approval; control boundaries); the last
 * tool call of a pass closes the tools phase in its own activity (no `finishTools` local
 * activity, decision 28).
 */
const PATCH_0_4 = 'turnkit-0.4';

/**
 * Release 0.5's command changes, one marker for all, decided at the run's start. A 0.5 run
 * has 0.4's and 0.3's changes too, and records only this marker.
 */
const PATCH_0_5 = 'turnkit-0.5';

/**
 * Release 0.6's command changes, one marker for all, decided at the run's start (decision 82):
 * the turn at the floor's shape. The run's first model step claims the turn (`claimStep`, no
 * `claimTurn` local activity); the step that ends the last phase makes the terminal write when
 * nothing is left to check (no `outputStep` local activity). A 0.6 run has 0.5's changes too.
 */
const PATCH_0_6 = 'turnkit-0.6';

/** What this run of the turn workflow does, fixed at its start. */
export interface RunFeatures {
  /** Release 0.6's changes (see `PATCH_0_6`). */
  v0_6: boolean;
  /** Release 0.5's changes (see `PATCH_0_5`). */
  v0_5: boolean;
  compaction: boolean;
  outputAudit: boolean;
  /** Approvals and turn controls (the Updates are registered only on such runs). */
  controls: boolean;
  /** The closing tool call closes the tools phase itself (`ToolCallInput.close`). */
  closeInToolCall: boolean;
}

/**
 * A patch released before 0.5 and asked where its change is (often right after a local
 * activity). A 0.5 run has it without asking: no `patched()` call a query can split from its
 * commands (decision 32). A run without the 0.5 marker asks as its history recorded.
 */
export function releasedPatch(features: RunFeatures, id: string): boolean {
  return features.v0_5 || patched(id);
}

/** Call first thing in the workflow, before any command. */
export function runFeatures(): RunFeatures {
  // A 0.4 run has 0.3's changes too, so it records only the newer marker (each costs a turn
  // two history events); a run without it is asked about 0.3 as before.
  const v0_6 = patched(PATCH_0_6);
  const v0_5 = v0_6 || patched(PATCH_0_5);
  const v0_4 = v0_5 || patched(PATCH_0_4);
  const v0_3 = v0_4 || patched(PATCH_0_3);
  return { v0_6, v0_5, compaction: v0_3, outputAudit: v0_3, controls: v0_4, closeInToolCall: v0_4 };
}
