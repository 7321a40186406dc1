/**
 * The oracle (spec §7.4): a read-only advisor over a directory tree. Its only default tool
 * reads files under one root, and the confinement is checked on real paths, so neither `..`
 * nor a symlink pointing outside the root reaches anything the application did not expose.
 */
import { constants, realpathSync, statSync } from 'node:fs';
import { open, realpath } from 'node:fs/promises';
import { isAbsolute, relative, resolve, sep } from 'node:path';
import { z } from 'zod';
import type { Agent } from '../agents/agent.js';
import { defineAgent } from '../agents/agent.js';
import type { ToolDefinition } from '../agents/tool.js';
import { ArgumentError, ToolError } from '../errors.js';
import type { SpecialistAgentOptions } from './read-only.js';
import { assertReadOnly, assertReadOnlySkills, joinInstructions, readOnlyTool } from './read-only.js';

/** Largest file `read_file` returns; bigger files are refused rather than silently cut. */
export const READ_FILE_MAX_BYTES = 100_000;

export const ORACLE_INSTRUCTIONS =
  'You are the oracle, a read-only advisor. Investigate with your tools, reason carefully, and answer ' +
  'with a precise, well-supported recommendation. You cannot change anything: do not claim you did.';

export interface ReadFileResult {
  /** The path relative to the root, with `/` separators. */
  path: string;
  content: string;
  bytes: number;
}

/**
 * Names `read_file` refuses by default, matched (case-insensitively, `*` as a wildcard) against
 * every segment of the path below the root: secrets, keys, VCS internals and databases that a
 * working directory usually holds next to the code a model is meant to read.
 */
export const READ_FILE_DENY: readonly string[] = [
  '.env*',
  '.git',
  '.turnkit',
  '.temporal',
  '.ssh',
  '.aws',
  '.gnupg',
  '.docker',
  '.kube',
  '.npmrc',
  '.yarnrc*',
  '.pypirc',
  '.netrc',
  '.pgpass',
  '.htpasswd',
  '*.sqlite*',
  '*.db',
  '*.db-*',
  '*.pem',
  '*.key',
  '*.p12',
  '*.pfx',
  '*.jks',
  '*.keystore',
  'id_*',
  'credentials*',
  'secrets.*',
  '*.tfstate*',
  '.vault-token',
];

function denyMatcher(deny: unknown): (rel: string) => boolean {
  if (
    !Array.isArray(deny) ||
    deny.some((name) => typeof name !== 'string' || name === '' || /[/\\]/.test(name))
  )
    throw new ArgumentError('deny must be a list of file or directory names (`*` as a wildcard)');
  const patterns = (deny as string[]).map(
    (name) => new RegExp(`^${name.replace(/[.+?^${}()|[\]]/g, '\\$&').replace(/\*/g, '.*')}$`, 'i'),
  );
  return (rel) => rel.split(sep).some((segment) => patterns.some((pattern) => pattern.test(segment)));
}

function inside(root: string, candidate: string): string | null {
  const rel = relative(root, candidate);
  if (rel === '') return '';
  if (rel === '..' || rel.startsWith(`..${sep}`) || isAbsolute(rel)) return null;
  return rel;
}

function realRootOf(root: unknown): string {
  if (typeof root !== 'string' || root === '') throw new ArgumentError('root must be a non-empty path');
  let real: string;
  try {
    real = realpathSync(resolve(root));
  } catch (error) {
    throw new ArgumentError(`root ${root} does not exist`, { cause: error });
  }
  if (!statSync(real).isDirectory()) throw new ArgumentError(`root ${root} is not a directory`);
  return real;
}

/**
 * `read_file`: reads a UTF-8 text file under `root`. The root is resolved to its real path
 * once, at definition; each call resolves the requested file's real path and refuses it
 * unless it lies inside that root. The file is then opened without following a final symlink
 * and checked again through the open handle, so a swap after the check cannot widen access
 * to a file of another size or kind. Paths with a segment on the `deny` list (default
 * `READ_FILE_DENY`: `.env*`, `.git`, `.turnkit`, keys, databases, …) are refused, before
 * looking (so the answer says nothing about whether they exist) and again on the real path (a
 * symlink to one is refused too). Every failure is a ToolError the model can read.
 */
export function readFileTool(options: ReadFileToolOptions = {}): ToolDefinition {
  const root = realRootOf(options.root ?? process.cwd());
  const denied = denyMatcher(options.deny ?? READ_FILE_DENY);
  return readOnlyTool({
    name: 'read_file',
    description: `Read a text file (at most ${READ_FILE_MAX_BYTES} bytes) by its path relative to the project root.`,
    input: z.object({
      path: z.string().describe('Path of the file, relative to the project root.'),
    }),
    execute: async ({ path }): Promise<ReadFileResult> => {
      if (path.trim() === '' || path.includes('\0'))
        throw new ToolError('path must be a non-empty file path');
      const requested = resolve(root, path);
      const wanted = inside(root, requested);
      if (wanted === null) throw new ToolError(`path is outside the root: ${path}`);
      if (denied(wanted))
        throw new ToolError(`path is not readable (secrets, keys and databases are not): ${path}`);
      let real: string;
      try {
        real = await realpath(requested);
      } catch {
        throw new ToolError(`file not found: ${path}`);
      }
      const rel = inside(root, real);
      if (rel === null) throw new ToolError(`path is outside the root: ${path}`);
      if (denied(rel))
        throw new ToolError(`path is not readable (secrets, keys and databases are not): ${path}`);
      let handle: Awaited<ReturnType<typeof open>>;
      try {
        handle = await open(real, constants.O_RDONLY | constants.O_NOFOLLOW);
      } catch {
        throw new ToolError(`cannot open ${path}`);
      }
      try {
        const stats = await handle.stat();
        if (!stats.isFile()) throw new ToolError(`not a regular file: ${path}`);
        if (stats.size > READ_FILE_MAX_BYTES) {
          throw new ToolError(
            `file is too large: ${path} has ${stats.size} bytes (limit ${READ_FILE_MAX_BYTES})`,
          );
        }
        // Read one byte past the cap so a file that grew after the stat is still refused.
        const buffer = Buffer.alloc(READ_FILE_MAX_BYTES + 1);
        const { bytesRead } = await handle.read(buffer, 0, buffer.length, 0);
        if (bytesRead > READ_FILE_MAX_BYTES) {
          throw new ToolError(`file is too large: ${path} (limit ${READ_FILE_MAX_BYTES} bytes)`);
        }
        return {
          path: rel.split(sep).join('/'),
          content: buffer.subarray(0, bytesRead).toString('utf8'),
          bytes: bytesRead,
        };
      } catch (error) {
        if (error instanceof ToolError) throw error;
        throw new ToolError(`cannot read ${path}`);
      } finally {
        await handle.close();
      }
    },
  });
}

export interface ReadFileToolOptions {
  /** The directory files are read under (default: the working directory). */
  root?: string;
  /** Names refused anywhere in a path (default `READ_FILE_DENY`; `[]` refuses nothing). */
  deny?: readonly string[];
}

export type OracleOptions = SpecialistAgentOptions & {
  /** Read-only tools to offer instead of the default `read_file`. */
  tools?: readonly ToolDefinition[];
  /** The directory `read_file` is confined to (default: the working directory). */
  root?: string;
  /** Names `read_file` refuses anywhere in a path (default `READ_FILE_DENY`). */
  deny?: readonly string[];
  /** Appended to the oracle's own instructions. */
  instructions?: string;
  /** Rejected: a read-only specialist cannot delegate. */
  subAgents?: never;
};

/** An ordinary agent named `oracle` that can only read (spec §7.4). */
export function oracle(options: OracleOptions = {}): Agent {
  const { tools, root, deny, instructions, subAgents, name, ...agentOptions } = options;
  const checked = assertReadOnly('oracle', tools, subAgents);
  assertReadOnlySkills('oracle', agentOptions);
  return defineAgent({
    ...agentOptions,
    // Specialists take no global defaults (skills, contributors, limits): spec §7.4.
    inheritGlobals: false,
    name: name ?? 'oracle',
    description:
      agentOptions.description ?? 'A read-only advisor that reads the project and gives a considered answer.',
    instructions: joinInstructions(ORACLE_INSTRUCTIONS, instructions),
    tools:
      tools === undefined
        ? [readFileTool({ root: root ?? process.cwd(), ...(deny !== undefined ? { deny } : {}) })]
        : checked,
  });
}
