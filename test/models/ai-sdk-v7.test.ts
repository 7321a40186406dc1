import type { LanguageModelV4GenerateResult, LanguageModelV4StreamPart } from '@ai-sdk/provider';
import type { LanguageModel } from 'ai';
import { convertArrayToReadableStream, MockLanguageModelV4 } from 'ai/test';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineAgent } from '../../src/agents/agent.js';
import { defineTool } from '../../src/agents/tool.js';
import { ConfigError } from '../../src/errors.js';
import { AiSdkModel } from '../../src/models/ai-sdk-model.js';
import type { ModelRequest } from '../../src/models/types.js';
import { startKit, type TestKit } from '../helpers/turnkit.js';
import { requireTemporal } from '../helpers/temporal.js';

const usage = (input: number, output: number): LanguageModelV4GenerateResult['usage'] => ({
  inputTokens: { total: input, noCache: input, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: output, text: output, reasoning: 0 },
});
const answer = (text: string): LanguageModelV4GenerateResult => ({
  content: [{ type: 'text', text }],
  finishReason: { unified: 'stop', raw: 'stop' },
  usage: usage(12, 3),
  warnings: [],
});
const callTool = (id: string, input: object): LanguageModelV4GenerateResult => ({
  content: [{ type: 'tool-call', toolCallId: id, toolName: 'lookup', input: JSON.stringify(input) }],
  finishReason: { unified: 'tool-calls', raw: 'tool_calls' },
  usage: usage(20, 5),
  warnings: [],
});

/** A generate result as the v4 stream a turn's model step reads (it streams). */
const streamOf = (result: LanguageModelV4GenerateResult) => ({
  stream: convertArrayToReadableStream<LanguageModelV4StreamPart>([
    { type: 'stream-start', warnings: [] },
    ...result.content.flatMap((part): LanguageModelV4StreamPart[] =>
      part.type === 'text'
        ? [
            { type: 'text-start', id: 't' },
            { type: 'text-delta', id: 't', delta: part.text },
            { type: 'text-end', id: 't' },
          ]
        : part.type === 'tool-call'
          ? [part]
          : [],
    ),
    { type: 'finish', finishReason: result.finishReason, usage: result.usage },
  ]),
});

/** A provider package of the AI SDK 4 line: its models implement specification v1. */
const aiSdk4Model = { specificationVersion: 'v1', provider: 'legacy.chat', modelId: 'old-model' };

const request: ModelRequest = {
  model: 'mock-model',
  instructions: 'You are a test.',
  dynamicInstructions: '',
  messages: [{ role: 'user', content: 'hello' }],
  tools: [],
  metadata: { turnId: 't', conversationId: 'c', agentName: 'a' },
};

describe('AI SDK 7 adapter against the SDK’s own MockLanguageModelV4', () => {
  it('maps text and usage, and passes the system prompt and messages in the v4 prompt format', async () => {
    const mock = new MockLanguageModelV4({ doGenerate: answer('hi there') });
    const client = new AiSdkModel({ provider: () => mock });
    const result = await client.chat(request, { signal: new AbortController().signal });
    expect(result.parts).toEqual([{ type: 'text', text: 'hi there' }]);
    expect(result.usage).toMatchObject({ inputTokens: 12, outputTokens: 3 });
    expect(mock.doGenerateCalls).toHaveLength(1);
    const prompt = mock.doGenerateCalls[0]!.prompt;
    expect(prompt[0]).toMatchObject({ role: 'system', content: 'You are a test.' });
    expect(prompt[1]).toMatchObject({ role: 'user', content: [{ type: 'text', text: 'hello' }] });
  });

  it('a provider from an incompatible AI SDK major is a ConfigError naming the versions, before any call', () => {
    const client = new AiSdkModel({ provider: () => aiSdk4Model as unknown as LanguageModel });
    const attempt = () => client.validate('old-model');
    expect(attempt).toThrow(ConfigError);
    expect(attempt).toThrow(/specification "v1".*ai@7.*v4 \(AI SDK 7\), v3 \(AI SDK 6\), v2 \(AI SDK 5\)/);
  });
});

describe('AI SDK 7 models through a real turn', () => {
  let kit: TestKit;
  const v4 = new MockLanguageModelV4({
    doStream: [
      streamOf(callTool('call_1', { word: 'durable' })),
      streamOf(answer('Durable means it survives.')),
    ],
  });
  const lookup = defineTool({
    name: 'lookup',
    description: 'Looks a word up.',
    input: z.object({ word: z.string() }),
    recovery: 'replaySafe',
    execute: async ({ word }) => ({ word, meaning: 'lasting' }),
  });

  beforeAll(async () => {
    await requireTemporal();
    kit = await startKit({
      agents: [
        defineAgent({
          name: 'v4-helper',
          model: 'mock-model',
          tools: [lookup],
          client: new AiSdkModel({ provider: () => v4 }),
        }),
        defineAgent({
          name: 'legacy-helper',
          model: 'old-model',
          client: new AiSdkModel({ provider: () => aiSdk4Model as unknown as LanguageModel }),
        }),
      ],
    });
  });
  afterAll(() => kit?.stop());

  it('a MockLanguageModelV4 asks for a tool, then answers: the turn completes with the tool result in the transcript', async () => {
    const run = await kit.client.run('v4-helper', 'Define durable');
    const turn = await run.result();
    expect(turn.status).toBe('completed');
    expect(turn.outputText).toBe('Durable means it survives.');
    const executions = await run.toolExecutions();
    expect(executions.map((e) => [e.toolName, e.status])).toEqual([['lookup', 'completed']]);
    expect(v4.doStreamCalls).toHaveLength(2);
    const second = JSON.stringify(v4.doStreamCalls[1]!.prompt);
    expect(second).toContain('lasting');
  });

  it('an AI SDK 4 provider fails the turn at once with ConfigError (no retries)', async () => {
    const run = await kit.client.run('legacy-helper', 'hello');
    const turn = await run.result();
    expect(turn.status).toBe('failed');
    expect(turn.error).toMatchObject({ class: 'TurnKit::ConfigError' });
    expect(turn.error!.message).toMatch(/specification "v1"/);
    // `validate` refuses it in the claim step, before the phase loop: no model request at all.
    const events = (await run.events()).map((e) => e.type);
    expect(events.filter((type) => type === 'turn.started')).toHaveLength(1);
    expect(events.filter((type) => type === 'model.requested')).toHaveLength(0);
  });
});
