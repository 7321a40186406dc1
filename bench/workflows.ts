// The benchmark's workflow bundle: TurnKit's turn workflow plus the floor it is measured against.
import { proxyActivities } from '@temporalio/workflow';

export { turnWorkflow } from '../src/workflows/turn-workflow.js';

const { noop } = proxyActivities<{ noop(): Promise<void> }>({ startToCloseTimeout: '1 minute' });

/** The floor: a bare workflow running two no-op activities. */
export async function floorWorkflow(): Promise<void> {
  await noop();
  await noop();
}
