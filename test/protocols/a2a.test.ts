/**
 * Issue 48, the A2A door: `@a2a-js/sdk`'s own client (JSON-RPC transport) against
 * `createA2AHandler`, the real Temporal dev server and a SQLite store (only the model is
 * scripted). A context is a conversation, a task is its turn; an approval is `input-required`
 * answered by the next message; a dropped stream resubscribes with nothing lost or repeated.
 */
import type { Message, StreamResponse, Task } from '@a2a-js/sdk';
import { Role, TaskState } from '@a2a-js/sdk';
import type { Client } from '@a2a-js/sdk/client';
import { ClientFactory, DefaultAgentCardResolver, JsonRpcTransportFactory } from '@a2a-js/sdk/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createA2AHandler } from '../../src/protocols/a2a-server.js';
import type { ProtocolBench } from '../helpers/protocol-kit.js';
import { bearer, charges, startProtocolBench } from '../helpers/protocol-kit.js';
import { waitUntil } from '../helpers/wait.js';

let bench: Omit<ProtocolBench, 'base'>;
let base: string;

function fetchAs(user: string | null): typeof fetch {
  return (input, init) => {
    const headers = new Headers(init?.headers);
    if (user) headers.set('authorization', `Bearer ${user}`);
    return fetch(input, { ...init, headers });
  };
}

async function clientFor(agent: string, user: string | null = 'alice'): Promise<Client> {
  const fetchImpl = fetchAs(user);
  const factory = new ClientFactory({
    transports: [new JsonRpcTransportFactory({ fetchImpl })],
    cardResolver: new DefaultAgentCardResolver({ fetchImpl }),
  });
  return factory.createFromUrl(`${base}/a2a/${agent}/`);
}

function message(text: string, ids: { contextId?: string; taskId?: string } = {}): Message {
  return {
    messageId: `m-${Math.random()}`,
    contextId: ids.contextId ?? '',
    taskId: ids.taskId ?? '',
    role: Role.ROLE_USER,
    parts: [
      { content: { $case: 'text', value: text }, metadata: undefined, filename: '', mediaType: 'text/plain' },
    ],
    metadata: undefined,
    extensions: [],
    referenceTaskIds: [],
  };
}

const send = (text: string, ids: { contextId?: string; taskId?: string } = {}) => ({
  tenant: '',
  message: message(text, ids),
  configuration: undefined,
  metadata: undefined,
});

const asTask = (result: unknown) => result as Task;
const textOfTask = (task: Task) =>
  task.artifacts
    .flatMap((a) => a.parts)
    .map((p) => (p.content?.$case === 'text' ? p.content.value : ''))
    .join('');
const chunkText = (event: StreamResponse) =>
  event.payload?.$case === 'artifactUpdate'
    ? (event.payload.value.artifact?.parts ?? [])
        .map((p) => (p.content?.$case === 'text' ? p.content.value : ''))
        .join('')
    : '';

beforeAll(async () => {
  bench = await startProtocolBench();
  const served = await bench.serve({
    '/a2a': createA2AHandler({ client: bench.client, authenticate: bearer, maxBodyBytes: 64 * 1024 }),
  });
  base = served.base;
});
afterAll(async () => {
  await bench?.stop();
});

describe('protocols: the A2A server', { timeout: 180_000 }, () => {
  it('protocols: the card describes the agent; a message runs a task in a context, and the next message continues the conversation', async () => {
    const client = await clientFor('pr_echo');
    const card = await client.getAgentCard();
    expect(card).toMatchObject({ name: 'pr_echo', description: 'Answers from a looked-up fact.' });
    expect(card.capabilities?.streaming).toBe(true);
    expect(card.supportedInterfaces[0]).toMatchObject({
      url: `${base}/a2a/pr_echo`,
      protocolBinding: 'JSONRPC',
    });

    const task = asTask(await client.sendMessage(send('Why durable?')));
    expect(task.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(textOfTask(task)).toBe('Durable execution keeps agents alive.');
    const turn = await bench.kit.store.loadTurn(task.id);
    expect(turn).toMatchObject({ conversationId: task.contextId, options: { principal: { user: 'alice' } } });

    const next = asTask(await client.sendMessage(send('And again?', { contextId: task.contextId })));
    expect(next.contextId).toBe(task.contextId);
    expect(next.id).not.toBe(task.id);
    expect(next.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect((await bench.kit.store.listTurns({ conversationId: task.contextId })).length).toBe(2);
    expect((await client.getTask({ tenant: '', id: task.id })).status?.state).toBe(
      TaskState.TASK_STATE_COMPLETED,
    );
  });

  it('protocols: a streamed task is resubscribed after a dropped stream with no chunk lost or repeated', async () => {
    const client = await clientFor('pr_slow');
    const drop = new AbortController();
    const seen: StreamResponse[] = [];
    const stream = client.sendMessageStream(send('Take your time.'), { signal: drop.signal });
    try {
      for await (const event of stream) {
        seen.push(event);
        if (seen.filter((e) => chunkText(e) !== '').length === 2) drop.abort();
      }
    } catch {
      // The dropped connection.
    }
    const first = seen[0]!.payload;
    expect(first?.$case).toBe('task');
    const taskId = (first!.value as Task).id;
    const before = seen.map(chunkText).join('');
    expect(before).not.toBe('');

    const resumed: StreamResponse[] = [];
    for await (const event of client.resubscribeTask({ tenant: '', id: taskId })) resumed.push(event);
    const snapshot = resumed[0]!.payload!.value as Task;
    const snapshotText = textOfTask(snapshot);
    expect(snapshotText.startsWith(before)).toBe(true);
    const after = resumed.slice(1).map(chunkText).join('');
    const last = resumed.at(-1)!.payload;
    expect(last?.$case).toBe('statusUpdate');
    expect((last!.value as { status: { state: TaskState } }).status.state).toBe(
      TaskState.TASK_STATE_COMPLETED,
    );
    expect(snapshotText + after).toBe((await bench.kit.store.loadTurn(taskId)).outputText);
  });

  it('protocols: an approval is input-required, and the next message on the task approves it', async () => {
    const client = await clientFor('pr_gate');
    const waiting = asTask(await client.sendMessage(send('Charge the card.')));
    expect(waiting.status?.state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
    const data = waiting.status?.message?.parts.find((p) => p.content?.$case === 'data')?.content?.value as {
      approvals: { toolName: string }[];
    };
    expect(data.approvals.map((a) => a.toolName)).toEqual(['charge_card']);
    const before = charges.length;
    const events: StreamResponse[] = [];
    for await (const event of client.sendMessageStream(
      send('approve', { taskId: waiting.id, contextId: waiting.contextId }),
    ))
      events.push(event);
    const last = events.at(-1)!.payload!.value as { status: { state: TaskState } };
    expect(last.status.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(events.map(chunkText).join('')).toBe('The card was charged.');
    expect(charges.slice(before)).toEqual([42]);
  });

  it('protocols: CancelTask cancels the turn', async () => {
    // A turn awaiting approval: it runs until decided, so the cancel never races its end.
    const client = await clientFor('pr_gate');
    const task = asTask(
      await client.sendMessage({
        ...send('Charge the card.'),
        configuration: { returnImmediately: true } as never,
      }),
    );
    await waitUntil(
      async () =>
        (await client.getTask({ tenant: '', id: task.id })).status?.state ===
        TaskState.TASK_STATE_INPUT_REQUIRED,
    );
    const cancelled = await client.cancelTask({ tenant: '', id: task.id, metadata: undefined });
    expect(cancelled.status?.state).toBe(TaskState.TASK_STATE_CANCELED);
    expect((await bench.kit.store.loadTurn(task.id)).status).toBe('cancelled');
    await expect(client.cancelTask({ tenant: '', id: task.id, metadata: undefined })).rejects.toThrow(
      /cancel/i,
    );
  });

  it("protocols: a request without credentials is refused, and another principal's task is not found", async () => {
    await expect(clientFor('pr_gate', null)).rejects.toThrow(/401/);
    const alice = await clientFor('pr_gate');
    const task = asTask(await alice.sendMessage(send('Charge the card.')));
    const bob = await clientFor('pr_gate', 'bob');
    const refusal = (id: string) =>
      bob.getTask({ tenant: '', id }).then(
        () => 'found',
        (e: Error) => e.message.replace(id, '<id>'),
      );
    const foreign = await refusal(task.id);
    expect(foreign).toMatch(/not found/);
    expect(await refusal('turn_doesnotexist')).toBe(foreign);
    await expect(bob.sendMessage(send('approve', { taskId: task.id }))).rejects.toThrow(/not found/);
    await expect(bob.sendMessage(send('hello', { contextId: task.contextId }))).rejects.toThrow(/no context/);
    expect((await bench.kit.store.loadTurn(task.id)).status).not.toBe('completed');
    await alice.cancelTask({ tenant: '', id: task.id, metadata: undefined });
  });

  it('protocols: bad inputs get the JSON-RPC error and write nothing', async () => {
    const before = await bench.turnCount();
    const rpc = async (path: string, body: string) => {
      const response = await fetch(`${base}${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: 'Bearer alice', 'a2a-version': '1.0' },
        body,
      });
      const text = await response.text();
      return {
        status: response.status,
        body: text ? (JSON.parse(text) as { error?: { code: number } }) : {},
      };
    };
    expect((await rpc('/a2a/pr_echo', '{"jsonrpc": "2.0", "method": ')).body.error?.code).toBe(-32700);
    expect((await rpc('/a2a/pr_echo', '{"hello": "world"}')).body.error?.code).toBeLessThan(-32000);
    expect((await rpc('/a2a/pr_nobody', '{}')).status).toBe(404);
    const huge = JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method: 'SendMessage',
      params: { message: { parts: [{ text: 'x'.repeat(70_000) }] } },
    });
    expect((await rpc('/a2a/pr_echo', huge)).status).toBe(413);
    const client = await clientFor('pr_echo');
    await expect(client.getTask({ tenant: '', id: 'turn_nope' })).rejects.toThrow(/not found/);
    await expect(client.sendMessage(send('   '))).rejects.toThrow(/needs a task/);
    expect(await bench.turnCount()).toBe(before);
  });
});
