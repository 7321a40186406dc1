import { ArgumentError } from '../errors.js';
import type { ToolDefinition } from './tool.js';

interface ApprovalTree {
  readonly effectiveTools: readonly ToolDefinition[];
  readonly subAgents: readonly ApprovalTree[];
}

/** The longest `approvalTimeout` among the tools needing approval in the tree, with its tool. */
function longestApprovalWait(
  tools: readonly ToolDefinition[],
  subAgents: readonly ApprovalTree[],
): { tool: string; ms: number } | null {
  let longest: { tool: string; ms: number } | null = null;
  const visit = (candidates: readonly ToolDefinition[], below: readonly ApprovalTree[]) => {
    for (const tool of candidates)
      if (
        tool.needsApproval &&
        tool.approvalTimeoutMs !== null &&
        tool.approvalTimeoutMs > (longest?.ms ?? 0)
      )
        longest = { tool: tool.name, ms: tool.approvalTimeoutMs };
    for (const sub of below) visit(sub.effectiveTools, sub.subAgents);
  };
  visit(tools, subAgents);
  return longest;
}

const seconds = (ms: number) => `${Math.ceil(ms / 1000)} s`;

/**
 * A tree runs under its root's timeout, counted from submission with every wait included
 * (spec §1.3, BG-09): an approval that may wait longer than that could never be answered, so
 * it is refused here, when the agent (or a run's limits) is defined.
 */
export function checkApprovalFits(
  where: string,
  timeout: number | null,
  tools: readonly ToolDefinition[],
  subAgents: readonly ApprovalTree[],
): void {
  if (timeout === null) return;
  const longest = longestApprovalWait(tools, subAgents);
  if (!longest || longest.ms <= timeout * 1000) return;
  throw new ArgumentError(
    `${where}: tool ${longest.tool} waits up to ${seconds(longest.ms)} for approval (approvalTimeout), ` +
      `longer than the timeout of ${timeout} s, which counts from submission and includes waits (spec §1.3): ` +
      `set limits: { timeout: ${Math.ceil(longest.ms / 1000) + 60} } (or null) or a shorter approvalTimeout`,
  );
}
