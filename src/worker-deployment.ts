/** Worker Versioning: the Worker options of `createWorker({ deployment })` (docs/operations.md). */
import type { WorkerOptions } from '@temporalio/worker';
import { ArgumentError } from './errors.js';

export interface WorkerDeployment {
  /** The Worker Deployment's name, e.g. the application's (one per task queue set). */
  name: string;
  /** This build's id, e.g. a release tag or a commit; a new id for every roll-out. */
  buildId: string;
}

const DEPLOYMENT_PART = /^[\w.:+@/-]{1,255}$/;

/**
 * The Worker options of a deployment: versioning on, and AUTO_UPGRADE for workflows that do
 * not declare a behaviour (TurnKit's two both do: turn-workflow.ts, lane-workflow.ts).
 */
export function deploymentWorkerOptions(
  deployment: WorkerDeployment,
): Pick<WorkerOptions, 'workerDeploymentOptions'> {
  for (const [key, value] of [
    ['name', deployment.name],
    ['buildId', deployment.buildId],
  ] as const) {
    if (typeof value !== 'string' || !DEPLOYMENT_PART.test(value)) {
      throw new ArgumentError(
        `deployment.${key} must be 1–255 letters, digits or . _ - : + @ / (got ${JSON.stringify(value)})`,
      );
    }
  }
  return {
    workerDeploymentOptions: {
      version: { deploymentName: deployment.name, buildId: deployment.buildId },
      useWorkerVersioning: true,
      defaultVersioningBehavior: 'AUTO_UPGRADE',
    },
  };
}
