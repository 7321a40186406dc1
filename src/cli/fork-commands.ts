/**
 * `turnkit fork <conversation> --at <message>` and `turnkit regenerate <turn>` (decision 47).
 * `fork` writes only the store (no Temporal, no agents module needed beyond the policy's);
 * `regenerate` starts the new run, so it needs the agents module.
 */
import type { Command } from 'commander';
import type { RegenerateOptions } from '../client/fork.js';
import type { ScheduleCommandContext } from './schedule-commands.js';
import { RecordNotFound } from '../errors.js';
import type { ConversationRecord, Store } from '../store/types.js';
import { CliError } from './project.js';
import { EXIT_CODES, head, jsonText, partText, terminalSafe, write } from './render.js';

interface ForkFlags {
  at?: string;
  empty?: boolean;
  principal?: string;
}

interface RegenerateFlags {
  model?: string;
  instructions?: string;
  principal?: string;
  prepare?: boolean;
}

export function addForkCommands(program: Command, ctx: ScheduleCommandContext): void {
  program
    .command('fork')
    .description("a new conversation with <conversation>'s history up to and including --at <message>")
    .argument('<conversation>')
    .option('--at <message>', 'the last message the fork carries')
    .option('--empty', 'a fork with an empty history (instead of --at)')
    .option('--principal <json>', 'who forks (JSON), authorized as `fork`')
    .action(
      ctx.run(false, async (client, _module, conversationId: string, flags: ForkFlags) => {
        if ((flags.at === undefined) === (flags.empty !== true))
          throw new CliError('fork needs --at <message> or --empty', EXIT_CODES.usage);
        const principal = ctx.parseJson('--principal', flags.principal);
        const fork = await client.fork(conversationId, {
          at: flags.at ?? null,
          ...(principal !== undefined ? { principal } : {}),
        });
        const messages = await fork.messages();
        if (ctx.json())
          return void write(
            ctx.out,
            `${jsonText({ conversation: fork.id, forkedFrom: conversationId, at: flags.at ?? null, messages: messages.length })}\n`,
          );
        write(ctx.out, `${terminalSafe(fork.id)}\n`);
        write(
          ctx.err,
          `${terminalSafe(`forked from ${conversationId} at ${flags.at ?? '(empty)'}: ${messages.length} message${messages.length === 1 ? '' : 's'}`)}\n`,
        );
      }),
    );

  program
    .command('regenerate')
    .description("run <turn>'s input again on a fork made just before it; prints the new turn")
    .argument('<turn>')
    .option('--model <model>', 'another model (comma-separated: a fallback chain)')
    .option('--instructions <text>', "other instructions, instead of the agent's")
    .option('--principal <json>', 'who regenerates (JSON), authorized as `fork`')
    .option('--prepare', 'write the new run without starting it')
    .action(
      ctx.run(true, async (client, _module, turnId: string, flags: RegenerateFlags) => {
        const principal = ctx.parseJson('--principal', flags.principal);
        const models = flags.model
          ?.split(',')
          .map((model) => model.trim())
          .filter(Boolean);
        const options: RegenerateOptions = {
          ...(models && models.length > 0 ? { model: models.length === 1 ? models[0]! : models } : {}),
          ...(flags.instructions !== undefined ? { instructions: flags.instructions } : {}),
          ...(principal !== undefined ? { principal } : {}),
          ...(flags.prepare ? { start: false } : {}),
        };
        const run = await client.regenerate(turnId, options);
        if (ctx.json())
          return void write(
            ctx.out,
            `${jsonText({ turn: run.turnId, conversation: run.conversationId, regenerated: turnId })}\n`,
          );
        write(ctx.out, `${terminalSafe(run.turnId)}\n`);
        write(
          ctx.err,
          `${terminalSafe(`regenerated ${turnId} on fork ${run.conversationId}${flags.prepare ? ' (prepared)' : ''}`)}\n`,
        );
      }),
    );
}

/** Where a conversation was forked from and its forks, for `turnkit show`. */
export async function forkSummary(
  store: Store,
  conversationId: string,
): Promise<{
  json: { forkedFrom: { conversation: string; message: string | null } | null; forks: ForkRow[] };
  lines: string[];
}> {
  const conversation = await store.loadConversation(conversationId);
  const forks = (await store.listForks(conversationId)).map((fork) => ({
    conversation: fork.id,
    at: fork.forkedFromMessageId,
    createdAt: fork.createdAt,
  }));
  const forkedFrom =
    conversation.forkedFromConversationId === null
      ? null
      : { conversation: conversation.forkedFromConversationId, message: conversation.forkedFromMessageId };
  const lines = [
    ...(forkedFrom ? [`  forked from ${forkedFrom.conversation} at ${forkedFrom.message ?? '(empty)'}`] : []),
    ...(forks.length > 0
      ? [
          'forks',
          ...forks.map((fork) => `  ${fork.conversation} at ${fork.at ?? '(empty)'} · ${fork.createdAt}`),
        ]
      : []),
  ].map(terminalSafe);
  return { json: { forkedFrom, forks }, lines };
}

interface ForkRow {
  conversation: string;
  at: string | null;
  createdAt: string;
}

/** `turnkit show <conversation>`: its messages (with ids, to fork at), turns, origin and forks. */
export async function showConversation(
  store: Store,
  conversationId: string,
  out: NodeJS.WriteStream,
  json: boolean,
): Promise<number> {
  let conversation: ConversationRecord;
  try {
    conversation = await store.loadConversation(conversationId);
  } catch (error) {
    if (error instanceof RecordNotFound) throw new CliError(`no conversation ${conversationId} in the store`);
    throw error;
  }
  const messages = await store.listMessages(conversationId);
  const turns = await store.listTurns({ conversationId });
  const forks = await forkSummary(store, conversationId);
  if (json) {
    write(
      out,
      `${jsonText({ conversation, messages, turns: turns.map((t) => ({ id: t.id, status: t.status })), ...forks.json })}\n`,
    );
    return 0;
  }
  const lines = [
    terminalSafe(`${conversation.agentName} ${conversation.id}`),
    ...forks.lines,
    'messages',
    ...messages.map(
      (message) =>
        `  #${message.sequence} ${message.id} ${message.role}/${message.kind}: ${head(message.content.map(partText).join(' '), 160)}`,
    ),
    ...(turns.length > 0
      ? ['turns', ...turns.map((turn) => terminalSafe(`  ${turn.id} ${turn.status}`))]
      : []),
  ];
  write(out, `${lines.join('\n')}\n`);
  return 0;
}
