// The workflow bundle's entry point: every workflow TurnKit workers run.
export { turnWorkflow } from './turn-workflow.js';
export { laneWorkflow } from './lane-workflow.js';
export { scheduledTurnWorkflow } from './scheduled-turn-workflow.js';
export { retentionWorkflow } from './retention-workflow.js';
export { agentCallWorkflow } from './agent-call-workflow.js';
export { erasureWorkflow } from './erasure-workflow.js';
