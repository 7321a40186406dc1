/**
 * `turnkit/workflow`: agents called from an application's own workflow code. Workflow-safe
 * (deterministic): import it in the workflows a worker with `TurnKitPlugin` runs.
 */
export { runAgent, startAgent } from './workflows/agent-call.js';
export type { AgentRun } from './workflows/agent-call.js';
export type { AgentCallBudget, AgentCallOptions, AgentTurnDigest } from './contract/agent-call.js';
export { turnkitNexusService } from './contract/nexus-service.js';
export type { RunTurnInput } from './contract/nexus-service.js';
export type { ControlAction } from './contract/control-request.js';
