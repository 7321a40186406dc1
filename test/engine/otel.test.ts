/**
 * OpenTelemetry on the real dev server, with the SDK's in-memory span exporter: one trace from
 * client.run through the workflow to every activity, GenAI spans for model and tool calls,
 * failed attempts as failed spans, and a tracer that throws never failing a turn.
 */
import type { Tracer, TracerProvider } from '@opentelemetry/api';
import { SpanStatusCode } from '@opentelemetry/api';
import type { ReadableSpan } from '@opentelemetry/sdk-trace-base';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineAgent } from '../../src/agents/agent.js';
import { AgentRegistry } from '../../src/agents/registry.js';
import { defineTool } from '../../src/agents/tool.js';
import { TurnKitClient } from '../../src/client/turnkit-client.js';
import type { TracingOptions } from '../../src/engine/telemetry/tracing.js';
import { ScriptedModel } from '../../src/models/scripted-model.js';
import { openStore } from '../../src/store/index.js';
import type { Store } from '../../src/store/types.js';
import { createWorker } from '../../src/worker.js';
import { connectClient, connectNative, requireTemporal, uniqueTaskQueue } from '../helpers/temporal.js';
import { startKit, tempSqliteUrl } from '../helpers/turnkit.js';
import { waitUntil } from '../helpers/wait.js';

const exporter = new InMemorySpanExporter();
const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });

const SECRET_TASK = 'Define the secret word xyzzy.';
const lookup = defineTool({
  name: 'lookup',
  description: 'Looks a word up.',
  input: z.object({ word: z.string() }),
  execute: ({ word }) => ({ meaning: `secret meaning of ${word}` }),
});
let flakyAttempts = 0;
const flaky = defineTool({
  name: 'flaky',
  description: 'Fails on its first attempt.',
  input: z.object({}),
  recovery: 'replaySafe',
  execute: () => {
    flakyAttempts += 1;
    if (flakyAttempts === 1) throw new Error('first attempt dies');
    return { ok: true };
  },
});
const agents = [
  defineAgent({ name: 'traced', tools: [lookup] }),
  defineAgent({ name: 'retried', tools: [flaky] }),
  defineAgent({ name: 'slowpoke' }),
  defineAgent({ name: 'falling', model: ['p:first', 'p:second'] }),
];
const model = () =>
  new ScriptedModel({
    traced: [
      {
        toolCalls: [{ name: 'lookup', arguments: { word: 'xyzzy' } }],
        usage: { inputTokens: 100, outputTokens: 20 },
      },
      { text: 'It means magic.', usage: { inputTokens: 150, outputTokens: 10 } },
    ],
    retried: [
      { error: { status: 503, message: 'overloaded' } },
      { toolCalls: [{ name: 'flaky', arguments: {} }] },
      'done',
    ],
    // The first model of its chain is overloaded: the second serves the step (issue 30).
    falling: [{ error: { status: 529, message: 'overloaded' } }, 'served by the second'],
    // Outlives its attempt's timeout, as a call on a dead worker would; the retry answers.
    slowpoke: [{ text: 'too late', delayMs: 8_000 }, 'on time'],
  });

/** The spans of one turn's trace, once its workflow span has come out of the sandbox. */
async function traceOf(
  turnId: string,
  expected: (spans: ReadableSpan[]) => boolean,
): Promise<ReadableSpan[]> {
  let spans: ReadableSpan[] = [];
  await waitUntil(async () => {
    const root = exporter
      .getFinishedSpans()
      .find((span) => span.name.startsWith('invoke_agent') && span.attributes['turnkit.turn.id'] === turnId);
    if (!root) return false;
    spans = exporter
      .getFinishedSpans()
      .filter((span) => span.spanContext().traceId === root.spanContext().traceId);
    return expected(spans);
  }, 30_000);
  return spans;
}

const named = (spans: ReadableSpan[], prefix: string) => spans.filter((span) => span.name.startsWith(prefix));
/** The model activities' spans: a 0.6 turn's first model call runs in its claim step (decision 82). */
const modelActivitySpans = (spans: ReadableSpan[]) =>
  spans.filter((span) => span.name === 'RunActivity:modelStep' || span.name === 'RunActivity:claimStep');

describe.skipIf(!(await requireTemporal()))('otel', () => {
  let store: Store;
  let stop: () => Promise<void>;
  let client: TurnKitClient;
  const tracing: TracingOptions = { tracerProvider: provider };

  beforeAll(async () => {
    store = await openStore(tempSqliteUrl());
    const taskQueue = uniqueTaskQueue('otel');
    const registry = new AgentRegistry(agents);
    const worker = await createWorker({
      store,
      agents: registry,
      model: model(),
      defaultModel: 'scripted-model',
      cost: { costRates: { 'scripted-model': { input: 2, output: 10 } } },
      connection: await connectNative(),
      taskQueue,
      tracing,
    });
    const running = worker.run();
    stop = async () => {
      worker.shutdown();
      await running;
    };
    client = new TurnKitClient({
      store,
      agents: registry,
      temporal: await connectClient(),
      taskQueue,
      tracing,
    });
  }, 60_000);

  afterAll(async () => {
    await stop?.();
    await store?.close();
  });

  it('otel: one connected trace runs from client.run through the workflow to every activity, with GenAI model and tool spans and no transcript text', async () => {
    const run = await client.run('traced', SECRET_TASK);
    const turn = await run.result();
    expect(turn.status).toBe('completed');
    const spans = await traceOf(
      turn.id,
      (all) => named(all, 'chat').length === 2 && named(all, 'RunWorkflow').length >= 1,
    );
    // Connected: one root (client.run), and every other span's parent is in the trace.
    const ids = new Set(spans.map((span) => span.spanContext().spanId));
    const roots = spans.filter((span) => !span.parentSpanId);
    expect(roots.map((span) => span.name)).toEqual(['invoke_agent traced']);
    expect(spans.filter((span) => span.parentSpanId && !ids.has(span.parentSpanId))).toEqual([]);
    for (const name of [
      'StartWorkflow:turnWorkflow',
      'RunWorkflow:turnWorkflow',
      'RunActivity:modelStep',
      'RunActivity:toolCall',
    ])
      expect(spans.map((span) => span.name)).toContain(name);

    const chats = named(spans, 'chat');
    expect(chats.map((span) => span.name)).toEqual(['chat scripted-model', 'chat scripted-model']);
    expect(chats[0]!.attributes).toMatchObject({
      'gen_ai.operation.name': 'chat',
      'gen_ai.request.model': 'scripted-model',
      'gen_ai.usage.input_tokens': 100,
      'gen_ai.usage.output_tokens': 20,
      'gen_ai.response.finish_reasons': ['tool-calls'],
      'turnkit.turn.id': turn.id,
      'gen_ai.agent.name': 'traced',
    });
    expect(chats[0]!.attributes['turnkit.cost_usd']).toBeCloseTo((100 * 2 + 20 * 10) / 1e6, 12);
    expect(chats[0]!.attributes['gen_ai.provider.name']).toBeTypeOf('string');
    // Each model span sits inside its activity's span.
    const modelActivities = new Set(modelActivitySpans(spans).map((span) => span.spanContext().spanId));
    expect(chats.every((span) => modelActivities.has(span.parentSpanId!))).toBe(true);

    const [execution] = await run.toolExecutions();
    const [tool] = named(spans, 'execute_tool');
    expect(tool!.name).toBe('execute_tool lookup');
    expect(tool!.attributes).toMatchObject({
      'gen_ai.operation.name': 'execute_tool',
      'gen_ai.tool.name': 'lookup',
      'gen_ai.tool.call.id': execution!.toolCallId,
      'turnkit.turn.id': turn.id,
    });
    expect(tool!.status.code).toBe(SpanStatusCode.OK);
    // No transcript text anywhere: not the task, the tool's arguments or result, nor the answer.
    const text = JSON.stringify(spans.map((span) => [span.name, span.attributes, span.events]));
    for (const secret of ['xyzzy', 'secret meaning', 'It means magic']) expect(text).not.toContain(secret);
  });

  it('otel: a retried model attempt and a retried tool attempt show as failed spans beside the ones that succeeded', async () => {
    flakyAttempts = 0;
    const run = await client.run('retried', 'Try twice.');
    const turn = await run.result();
    expect(turn.status).toBe('completed');
    const spans = await traceOf(
      turn.id,
      (all) => named(all, 'chat').length === 3 && named(all, 'execute_tool').length === 2,
    );
    const status = (prefix: string) => named(spans, prefix).map((span) => span.status.code);
    expect(status('chat')).toEqual([SpanStatusCode.ERROR, SpanStatusCode.OK, SpanStatusCode.OK]);
    expect(named(spans, 'chat')[0]!.status.message).toContain('overloaded');
    expect(named(spans, 'chat')[0]!.attributes['error.type']).toBe('ModelError');
    expect(status('execute_tool')).toEqual([SpanStatusCode.ERROR, SpanStatusCode.OK]);
    // The activity attempts themselves: the failed one is a span too, not a gap.
    const models = modelActivitySpans(spans);
    expect(models).toHaveLength(3);
    expect(models.filter((span) => span.status.code === SpanStatusCode.ERROR)).toHaveLength(1);
    const tools = named(spans, 'RunActivity:toolCall');
    expect(tools).toHaveLength(2);
    expect(tools.filter((span) => span.status.code === SpanStatusCode.ERROR)).toHaveLength(1);
  });

  it('gateway: the model that served a fallen-over step names its span; the failed model names its own', async () => {
    const strict = new TurnKitClient({
      store,
      agents: new AgentRegistry(agents),
      temporal: await connectClient(),
      taskQueue: client.taskQueue,
      tracing,
      turnSettings: { maxProviderAttempts: 1 },
    });
    const turn = await (await strict.run('falling', 'Answer.')).result();
    expect(turn.status).toBe('completed');
    const spans = await traceOf(turn.id, (all) => named(all, 'chat').length === 2);
    const chats = named(spans, 'chat');
    expect(chats.map((span) => span.name)).toEqual(['chat p:first', 'chat p:second']);
    expect(chats.map((span) => span.status.code)).toEqual([SpanStatusCode.ERROR, SpanStatusCode.OK]);
    expect(chats[1]!.attributes['gen_ai.request.model']).toBe('p:second');
  });

  it('otel: an attempt that timed out is a failed span, not a missing one, and its retry a successful one', async () => {
    const strict = new TurnKitClient({
      store,
      agents: new AgentRegistry(agents),
      temporal: await connectClient(),
      taskQueue: client.taskQueue,
      tracing,
      turnSettings: {
        model: { startToCloseTimeout: '2 seconds', heartbeatTimeout: '1 second', maximumAttempts: 3 },
      },
    });
    const turn = await (await strict.run('slowpoke', 'Answer in time.')).result();
    expect(turn.status).toBe('completed');
    expect(turn.outputText).toBe('on time');
    const spans = await traceOf(
      turn.id,
      (all) => named(all, 'chat').length === 2 && modelActivitySpans(all).length === 2,
    );
    expect(named(spans, 'chat').map((span) => span.status.code)).toEqual([
      SpanStatusCode.ERROR,
      SpanStatusCode.OK,
    ]);
    const attempts = modelActivitySpans(spans);
    expect(attempts.map((span) => span.status.code).sort()).toEqual(
      [SpanStatusCode.OK, SpanStatusCode.ERROR].sort(),
    );
  });

  it('otel: transcript text goes into spans only when recordContent is enabled', async () => {
    const recording: TracingOptions = { tracerProvider: provider, recordContent: true };
    const kit = await startKit({ agents, model: model(), runtime: { tracing: recording } });
    try {
      const recorder = new TurnKitClient({
        store: kit.store,
        agents: kit.agents,
        temporal: await connectClient(),
        taskQueue: kit.taskQueue,
        tracing: recording,
      });
      const turn = await (await recorder.run('traced', SECRET_TASK)).result();
      expect(turn.status).toBe('completed');
      const spans = await traceOf(turn.id, (all) => named(all, 'chat').length === 2);
      const [first, second] = named(spans, 'chat');
      expect(String(first!.attributes['gen_ai.input.messages'])).toContain('xyzzy');
      expect(String(second!.attributes['gen_ai.output.messages'])).toContain('It means magic.');
      const [tool] = named(spans, 'execute_tool');
      expect(tool!.attributes['gen_ai.tool.call.arguments']).toBe('{"word":"xyzzy"}');
      expect(String(tool!.attributes['gen_ai.tool.call.result'])).toContain('secret meaning of xyzzy');
    } finally {
      await kit.stop();
    }
  });

  it('otel: a tracer that throws is logged and never fails a turn', async () => {
    const broken: Tracer = {
      startSpan: () => {
        throw new Error('tracer exploded');
      },
      startActiveSpan: () => {
        throw new Error('tracer exploded');
      },
    } as unknown as Tracer;
    const throwing: TracerProvider = { getTracer: () => broken };
    const warnings: string[] = [];
    const logger = {
      warn: (...args: unknown[]) => warnings.push(args.map(String).join(' ')),
      error: () => undefined,
    };
    const kit = await startKit({
      agents,
      model: model(),
      runtime: { tracing: { tracerProvider: throwing }, logger },
    });
    try {
      const traced = new TurnKitClient({
        store: kit.store,
        agents: kit.agents,
        temporal: await connectClient(),
        taskQueue: kit.taskQueue,
        tracing: { tracerProvider: throwing },
      });
      const turn = await (await traced.run('traced', 'Look it up.')).result();
      expect(turn.status).toBe('completed');
      expect(turn.outputText).toBe('It means magic.');
      expect(
        warnings.some((line) => line.includes('the tracer failed') && line.includes('tracer exploded')),
      ).toBe(true);
    } finally {
      await kit.stop();
    }
  });

  it('otel: without a tracer provider nothing is traced', async () => {
    const before = exporter.getFinishedSpans().length;
    const kit = await startKit({ agents, model: model() });
    try {
      const turn = await (await kit.client.run('traced', 'Look it up.')).result();
      expect(turn.status).toBe('completed');
      await new Promise((resolve) => setTimeout(resolve, 500));
      expect(exporter.getFinishedSpans().length).toBe(before);
    } finally {
      await kit.stop();
    }
  });
});
