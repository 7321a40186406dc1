/**
 * Worker Versioning (createWorker's `deployment`, docs/operations.md): the versioning
 * behaviour a TurnKit workflow declares. Only a worker that has a deployment version may
 * report one (Temporal refuses the workflow task otherwise: "versioning behavior cannot be
 * specified without deployment options being set with versioned mode"), so the declaration is
 * a getter, evaluated when the workflow starts on a worker, that asks whether that worker is
 * versioned (docs/decisions/034-bundles-and-worker-versioning.md).
 */
import type { VersioningBehavior, WorkflowDefinitionOptions } from '@temporalio/common';
import { workflowInfo } from '@temporalio/workflow';

export function whenVersioned(versioningBehavior: VersioningBehavior): () => WorkflowDefinitionOptions {
  // An unversioned worker reports a build id too, but no deployment name.
  return () => (workflowInfo().currentDeploymentVersion?.deploymentName ? { versioningBehavior } : {});
}
