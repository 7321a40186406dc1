/**
 * Patch ids (`patched()`): every change to the command sequence of the released turn workflow
 * is guarded, and CI replays the recorded histories of the earlier version.
 */
export const PATCH_SIGNALLED_WAITS = 'turnkit-signalled-waits-1';
export const PATCH_NOTIFY = 'turnkit-terminal-notice-1';
export const PATCH_COORDINATION = 'turnkit-coordination-tools-1';
export const PATCH_RECLAIM = 'turnkit-reclaim-after-reset-1';
export const PATCH_FAIL_ACTIVITY = 'turnkit-fail-as-activity-1';
/** A model phase asks whether compaction is due and runs `compactStep` first when it is. */
export const PATCH_COMPACTION = 'turnkit-compaction-1';
/** Output constraints and judges run in their own scheduled activity before the output step. */
export const PATCH_OUTPUT_AUDIT = 'turnkit-output-audit-activity-1';
