/**
 * A first agent on a real provider: one tool, a worker and a client in one file
 * (docs/first-agent.md walks through it).
 *
 *   export TURNKIT_MODEL=openai:gpt-4o-mini OPENAI_API_KEY=sk-...   # or anthropic:…, ANTHROPIC_API_KEY
 *   npx tsx examples/first-agent.ts "Where is my order A-1001?"
 *
 * It needs a Temporal server (`npm run demo` leaves the dev server on 127.0.0.1:7233, or
 * TEMPORAL_ADDRESS / a Temporal profile) and writes to TURNKIT_DATABASE_URL, else
 * .turnkit/turnkit.sqlite. In an application the imports are 'turnkit', 'turnkit/store' and
 * 'turnkit/worker'.
 */
import { z } from 'zod';
import { AgentRegistry, TurnKitClient, defineAgent, defineTool } from '../src/index.js';
import { openStore } from '../src/store/index.js';
import { createWorker } from '../src/worker.js';

const modelId = process.env['TURNKIT_MODEL'];
if (!modelId?.includes(':')) {
  console.error(
    'first-agent: set TURNKIT_MODEL to provider:model (e.g. openai:gpt-4o-mini) and that ' +
      "provider's key (e.g. OPENAI_API_KEY); see docs/first-agent.md",
  );
  process.exit(2);
}

// Your own data; here a table, in an application your database or an API.
const orders: Record<string, { status: string; carrier: string; eta: string }> = {
  'A-1001': { status: 'shipped', carrier: 'DHL', eta: '2026-12-09' },
  'A-1002': { status: 'packing', carrier: 'UPS', eta: '2026-12-12' },
};

const orderStatus = defineTool({
  name: 'order_status',
  description: 'Looks up an order by its number (A- and four digits).',
  // The model's arguments are checked against this schema before execute runs.
  input: z.object({ orderId: z.string().regex(/^A-\d{4}$/) }),
  // A read: safe to run again if a worker dies mid-call.
  recovery: 'replaySafe',
  execute: async ({ orderId }) => {
    const order = orders[orderId];
    return order ? { orderId, ...order } : { orderId, found: false };
  },
});

const support = defineAgent({
  name: 'support',
  instructions:
    'You answer customers about their orders. Look the order up with order_status; ' +
    'never guess a status or a date. Answer in one or two sentences.',
  tools: [orderStatus],
  limits: { maxIterations: 6 },
});

// The model is TURNKIT_MODEL: the worker finds the provider by the id's prefix.
const store = await openStore();
const agents = new AgentRegistry([support]);
const worker = await createWorker({ store, agents });
const client = await TurnKitClient.connect({ store, agents });

const question = process.argv[2] ?? 'Where is my order A-1001?';
await worker.run(
  (async () => {
    const run = await client.run('support', question, { principal: { user: 'first-agent' } });
    console.log(`turn ${run.turnId} on ${modelId} (Temporal workflow ${run.workflowId})`);
    for await (const part of run.stream()) {
      if (part.turnId === run.turnId && part.type === 'text.delta') process.stdout.write(part.text);
    }
    const turn = await run.result();
    const usage = await run.usage();
    const tools = (await run.toolExecutions()).map((e) => `${e.toolName} ${e.status}`);
    console.log(`\n${turn.status}; tools: ${tools.join(', ') || 'none'}`);
    console.log(`${usage.input_tokens} tokens in, ${usage.output_tokens} out`);
    if (turn.status !== 'completed') {
      console.error(`first-agent: ${turn.error?.class}: ${turn.error?.message}`);
      process.exitCode = 1;
    }
    await client.close();
  })(),
);
await store.close();
