/**
 * The coordination tools (spec §7.1–7.3), opt-in per agent: add them to `tools`. The engine
 * runs them itself (they are identified by kind, never by identity): their executions start
 * `pending`, never take the running claim, and resume from their child ids or delivery keys.
 */
import { z } from 'zod';
import { ArgumentError, ConfigError } from '../errors.js';
import type { Agent } from './agent.js';
import type { ToolDefinition } from './tool.js';
import { buildTool } from './tool.js';

const engineOnly = (name: string) => () => {
  throw new ConfigError(`${name} is run by the TurnKit engine, never called directly`);
};

const launchInput = z.object({
  agent_name: z.string().describe('Name of the agent to launch.'),
  task: z.string().describe('The complete, self-contained task for the launched agent.'),
  callback: z
    .boolean()
    .optional()
    .describe('When true, the agent reports back to this conversation when it finishes.'),
});

export interface LaunchAgentTool extends ToolDefinition<typeof launchInput> {
  /** The agents this tool may launch. */
  readonly agents: readonly Agent[];
}

/**
 * `launch_agent`: starts one of `agents` as a detached child turn and returns at once; with
 * `callback: true` the child's result later arrives in this conversation as a message that
 * wakes it.
 */
export function launchAgentTool(options: { agents: readonly Agent[]; name?: string }): LaunchAgentTool {
  const agents = [...(options?.agents ?? [])];
  if (agents.length === 0) throw new ArgumentError('launchAgentTool needs at least one agent');
  const names = agents.map((agent) => agent.name);
  const tool = buildTool(
    {
      name: options.name ?? 'launch_agent',
      description:
        `Start an agent in the background without waiting for it. Available agents: ${names.join(', ')}. ` +
        'Returns its turn id at once; pass callback: true to have its result sent back here.',
      input: launchInput,
      execute: engineOnly('launch_agent'),
    },
    'launchAgent',
  );
  return Object.freeze({ ...tool, agents: Object.freeze(agents) });
}

/** `wait_for`: joins submitted turns; the turn waits without holding a worker. */
export function waitForTool(options: { name?: string } = {}): ToolDefinition {
  return buildTool(
    {
      name: options.name ?? 'wait_for',
      description:
        'Wait until the given turns have finished, then return their results. The conversation pauses meanwhile.',
      input: z.object({
        turn_ids: z.array(z.string()).min(1).describe('Ids of the turns to wait for.'),
      }),
      execute: engineOnly('wait_for'),
    },
    'waitFor',
  );
}

/** `send_message`: a durable message to another conversation, sent once per call. */
export function sendMessageTool(options: { name?: string } = {}): ToolDefinition {
  return buildTool(
    {
      name: options.name ?? 'send_message',
      description:
        'Send a message to another conversation. It is delivered once, even if this step is retried.',
      input: z.object({
        conversation_id: z.string().describe('Id of the destination conversation.'),
        text: z.string().min(1).describe('The message.'),
      }),
      execute: engineOnly('send_message'),
    },
    'sendMessage',
  );
}

export function isLaunchAgentTool(tool: ToolDefinition): tool is LaunchAgentTool {
  return tool.kind === 'launchAgent' && Array.isArray((tool as LaunchAgentTool).agents);
}
