/**
 * Read-only tools and the checks read-only specialists (oracle, librarian) apply to what they
 * are given (spec §7.4). A read-only specialist is safe to hand to any caller only if nothing
 * it can call changes the world, so every tool must declare itself read-only and the agent may
 * not delegate (a sub-agent could carry arbitrary tools).
 */
import type { z } from 'zod';
import type { AgentOptions } from '../agents/agent.js';
import type { ToolDefinition, ToolOptions } from '../agents/tool.js';
import { defineTool } from '../agents/tool.js';
import { ArgumentError } from '../errors.js';

export type ReadOnlyToolOptions<Schema extends z.ZodObject, Result> = Omit<
  ToolOptions<Schema, Result>,
  'readOnly' | 'recovery'
>;

/**
 * A tool without side effects: `readOnly: true` and `replaySafe` (re-running a read after a
 * crash is harmless).
 */
export function readOnlyTool<Schema extends z.ZodObject, Result>(
  options: ReadOnlyToolOptions<Schema, Result>,
): ToolDefinition<Schema, Result> {
  if (!options || typeof options !== 'object')
    throw new ArgumentError('readOnlyTool needs an options object');
  return defineTool({ ...options, readOnly: true, recovery: 'replaySafe' });
}

/**
 * Options every specialist accepts: an agent's, minus what the specialist decides itself.
 * `name` may be overridden so one registry can hold, say, two librarians for two repositories.
 */
export type SpecialistAgentOptions = Omit<AgentOptions, 'name' | 'tools' | 'subAgents' | 'instructions'> & {
  name?: string;
};

/**
 * Throws ArgumentError unless every tool is read-only and no sub-agents are configured.
 * `subAgents` is checked at run time too because JavaScript callers bypass the types.
 */
export function assertReadOnly(
  specialist: string,
  tools: readonly ToolDefinition[] | undefined,
  subAgents: unknown,
): readonly ToolDefinition[] {
  if (subAgents !== undefined && !(Array.isArray(subAgents) && subAgents.length === 0)) {
    throw new ArgumentError(`${specialist} is read-only and cannot have sub-agents`);
  }
  if (tools === undefined) return [];
  if (!Array.isArray(tools)) throw new ArgumentError(`${specialist}: tools must be an array`);
  tools.forEach((tool: unknown, index) => {
    const candidate = tool as Partial<ToolDefinition> | null;
    if (!candidate || typeof candidate !== 'object' || typeof candidate.name !== 'string') {
      throw new ArgumentError(`${specialist}: tools[${index}] is not a tool (build tools with defineTool)`);
    }
    if (candidate.readOnly !== true) {
      throw new ArgumentError(
        `${specialist} is read-only: tool ${candidate.name} is not (define it with readOnlyTool or readOnly: true)`,
      );
    }
    if (candidate.kind !== undefined && candidate.kind !== 'ordinary') {
      throw new ArgumentError(
        `${specialist} is read-only: tool ${candidate.name} is a ${candidate.kind} tool`,
      );
    }
  });
  return tools;
}

/** Throws ArgumentError unless every tool of every skill given is read-only (SP-05). */
export function assertReadOnlySkills(
  specialist: string,
  options: Pick<AgentOptions, 'skills' | 'availableSkills'>,
) {
  for (const skill of [...(options.skills ?? []), ...(options.availableSkills ?? [])]) {
    try {
      assertReadOnly(specialist, skill?.tools ?? [], undefined);
    } catch (error) {
      throw new ArgumentError(`skill ${skill?.key}: ${(error as Error).message}`);
    }
  }
}

/** The specialist's own instructions, followed by the application's (appended, never replacing). */
export function joinInstructions(own: string, extra: string | undefined): string {
  if (extra !== undefined && typeof extra !== 'string')
    throw new ArgumentError('instructions must be a string');
  const trimmed = extra?.trim();
  return trimmed ? `${own}\n\n${trimmed}` : own;
}
