/**
 * Records the workflow histories that CI replays (test/workflows/replay.test.ts): turns, the
 * lane, a schedule's firings.
 * Re-record only on purpose: a change that breaks replay of a released history needs
 * `patched()`. Run with the dev server up: `npx tsx scripts/record-histories.ts [name ...]`
 * (no names: all of them; give names to add a new history without re-recording the others).
 */
import { writeFileSync } from 'node:fs';
import { Context } from '@temporalio/activity';
import { historyToJSON } from '@temporalio/common/lib/proto-utils.js';
import { z } from 'zod';
import { defineAgent } from '../src/agents/agent.js';
import { defineTool } from '../src/agents/tool.js';
import { ScriptedModel } from '../src/models/scripted-model.js';
import { openStore } from '../src/store/index.js';
import type { Store } from '../src/store/types.js';
import { resetWorkflow } from '../test/helpers/reset.js';
import { startKit, tempSqliteUrl } from '../test/helpers/turnkit.js';
import { gate } from '../test/helpers/wait.js';

const finish = defineTool({
  name: 'finish',
  description: 'Ends the turn.',
  input: z.object({ answer: z.string() }),
  terminal: true,
  execute: ({ answer }) => ({ result: answer }),
});
const echo = defineTool({
  name: 'echo',
  description: 'Echoes.',
  input: z.object({ text: z.string() }),
  execute: ({ text }) => ({ text }),
});
const wire = defineTool({
  name: 'wire',
  description: 'Wires money once a person approved it.',
  input: z.object({ amount: z.number() }),
  needsApproval: true,
  execute: ({ amount }) => ({ wired: amount }),
});
const held = gate();
const hold = defineTool({
  name: 'hold',
  description: 'Holds until released.',
  input: z.object({}),
  execute: async () => {
    await held.promise;
    return { held: true };
  },
});
const busy = gate();
const occupy = defineTool({
  name: 'occupy',
  description: 'Keeps the conversation busy until released.',
  input: z.object({}),
  execute: async () => {
    await busy.promise;
    return { occupied: true };
  },
});
const posting = gate();
const holdPost = defineTool({
  name: 'hold_post',
  description: 'Keeps the conversation busy while posts arrive.',
  input: z.object({}),
  execute: async () => {
    await posting.promise;
    return { held: true };
  },
});
const reviewer = defineAgent({ name: 'reviewer' });
const answering = gate();
const model = new ScriptedModel({
  terminal: () => ({
    toolCalls: [
      { name: 'echo', arguments: { text: 'a' } },
      { name: 'finish', arguments: { answer: '42' } },
    ],
  }),
  looping: (request) =>
    request.messages.some((m) => m.role === 'tool')
      ? 'done'
      : { toolCalls: [{ name: 'echo', arguments: { text: 'x' } }] },
  fanout: (request) =>
    request.messages.some((m) => m.role === 'tool')
      ? 'joined'
      : {
          toolCalls: [
            { name: 'reviewer', arguments: { task: 'one' } },
            { name: 'reviewer', arguments: { task: 'two' } },
          ],
        },
  reviewer: () => 'reviewed',
  laned: () => 'heard',
  posted: (request) =>
    request.messages.some((m) => m.role === 'tool') ||
    !String(request.messages.filter((m) => m.role === 'user').at(-1)?.content).includes('wait')
      ? 'answered'
      : { toolCalls: [{ name: 'hold_post', arguments: {} }] },
  slowbusy: (request) =>
    request.messages.some((m) => m.role === 'tool') ||
    request.messages.filter((m) => m.role === 'user').length > 1
      ? 'after the lane'
      : { toolCalls: [{ name: 'occupy', arguments: {} }] },
  slowclaim: () => 'claimed slowly',
  checked: () => 'checked answer',
  revised: (request) => (request.messages.length > 1 ? 'final answer' : 'draft TODO'),
  failing: [{ error: { status: 400, message: 'rejected' } }],
  cancelled: () => ({ text: 'never', delayMs: 60_000 }),
  compacted: (request) => (request.metadata.purpose === 'compaction' ? 'summary' : 'answered'),
  approved: (request) =>
    request.messages.some((m) => m.role === 'tool')
      ? 'steered answer'
      : {
          toolCalls: [
            { name: 'wire', arguments: { amount: 5 } },
            { name: 'echo', arguments: { text: 'b' } },
          ],
        },
  // Its first answer waits until the test has asked for a pause; then it reads the steering.
  paused_output: async (request) => {
    if (request.messages.some((m) => m.role === 'assistant')) return 'steered before the output';
    await answering.promise;
    return 'first answer';
  },
  reclaimed: (request) =>
    request.messages.some((m) => m.role === 'tool')
      ? 'taken over'
      : { toolCalls: [{ name: 'hold', arguments: {} }] },
});
const inActivity = () => {
  try {
    return Boolean(Context.current());
  } catch {
    return false;
  }
};
// The worker's store: the claim of a turn listed in `slowClaims` reads it 17 s late, once
// (two workflow-task heartbeats).
const slowClaims = new Set<string>();
const plain = await openStore(tempSqliteUrl());
const store = new Proxy(plain, {
  get(target, prop) {
    const value: unknown = Reflect.get(target, prop, target);
    if (prop === 'loadTurn') {
      return async (id: string) => {
        if (inActivity() && slowClaims.delete(id))
          await new Promise((resolve) => setTimeout(resolve, 17_000));
        return target.loadTurn(id);
      };
    }
    return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
  },
}) as Store;
const kit = await startKit({
  store,
  agents: [
    defineAgent({ name: 'terminal', tools: [echo, finish] }),
    defineAgent({ name: 'looping', tools: [echo] }),
    defineAgent({ name: 'fanout', subAgents: [reviewer] }),
    defineAgent({ name: 'failing' }),
    defineAgent({ name: 'laned' }),
    defineAgent({ name: 'posted', tools: [holdPost] }),
    defineAgent({ name: 'cancelled' }),
    defineAgent({ name: 'reclaimed', tools: [hold] }),
    defineAgent({ name: 'slowbusy', tools: [occupy] }),
    // Approvals and turn controls (PATCH_0_4): a call held for approval, pause, steer, resume.
    defineAgent({ name: 'approved', tools: [wire, echo] }),
    defineAgent({ name: 'paused_output' }),
    defineAgent({
      name: 'compacted',
      compaction: { contextLimit: 600, reservedTokens: 0, tailMessages: 1, tailTokens: 100 },
    }),
    // A claim (a local activity) that outlives its workflow task: the model's validate takes
    // 9 s, so the claim's marker and the commands after it land in two workflow tasks.
    defineAgent({
      name: 'slowclaim',
      outputConstraints: [() => null],
      client: {
        validate: () => new Promise<void>((resolve) => setTimeout(resolve, 9_000)),
        chat: (request, options) => model.chat(request, options),
      },
    }),
    // Release 0.6: output checks whose activity also writes the output (decision 82).
    defineAgent({ name: 'checked', outputConstraints: [() => null] }),
    // Output checks in their own activity, and one revision (PATCH_0_3).
    defineAgent({
      name: 'revised',
      outputRetries: 1,
      outputConstraints: [(output) => (String(output).includes('TODO') ? 'remove the TODO' : null)],
    }),
  ],
  model,
});
const save = async (name: string, workflowId: string) => {
  const history = await kit.client.temporal.workflow.getHandle(workflowId).fetchHistory();
  writeFileSync(
    new URL(`../test/fixtures/histories/${name}.json`, import.meta.url),
    `${historyToJSON(history)}\n`,
  );
  console.log(`recorded ${name}: ${history.events?.length} events`);
};
const only = process.argv.slice(2);
const wanted = (name: string) => only.length === 0 || only.includes(name);
const until = async (predicate: () => Promise<boolean>) => {
  while (!(await predicate())) await new Promise((r) => setTimeout(r, 50));
};
for (const name of ['terminal', 'looping', 'fanout', 'failing', 'revised', 'slowclaim'].filter(wanted)) {
  const run = await kit.client.run(name, `record ${name}`);
  await run.result();
  await save(name, run.workflowId);
}
// Release 0.6 runs (decision 82): the first model step claims the turn, and the step that
// ends the last phase writes the output: a terminal tool after another call, output checks
// that write the output in their activity, a revision that goes back to the model.
for (const [name, agent] of [
  ['floor-tools', 'terminal'],
  ['floor-checks', 'checked'],
  ['floor-revised', 'revised'],
].filter(([name]) => wanted(name!))) {
  const run = await kit.client.run(agent!, `record ${name}`);
  await run.result();
  await save(name!, run.workflowId);
}
if (wanted('floor-busy')) {
  // Release 0.6: the claim step refused by a busy lane, then the nudge and the claim again.
  const conversation = await kit.client.conversation('slowbusy');
  const first = await conversation.ask('occupy the lane');
  await until(async () => (await first.toolExecutions()).some((e) => e.status === 'running'));
  const second = await conversation.ask('wait for the lane', { start: false });
  await second.start();
  await until(async () =>
    (await kit.client.temporal.workflow.getHandle(second.workflowId).fetchHistory()).events!.some(
      (e) => e.activityTaskCompletedEventAttributes,
    ),
  );
  busy.open();
  await first.result();
  await second.result();
  await save('floor-busy', second.workflowId);
}
// Release 0.4 runs: the closing tool call closes the tools phase in its own activity (a
// terminal tool after another call; a last ordinary call that goes back to the model).
for (const [name, agent] of [
  ['closed-terminal', 'terminal'],
  ['closed-loop', 'looping'],
].filter(([name]) => wanted(name!))) {
  const run = await kit.client.run(agent!, `record ${name}`);
  await run.result();
  await save(name!, run.workflowId);
}
// `cancelled` keeps the release it was recorded on (its cancel checked by a local activity);
// `cancelled-controls` is a run with the controls, whose cancel is checked by a scheduled one.
for (const name of ['cancelled', 'cancelled-controls'].filter(wanted)) {
  const run = await kit.client.run('cancelled', 'record cancel');
  await until(async () => (await run.events()).some((e) => e.type === 'model.requested'));
  await run.cancel({ descendants: 'cascade' });
  await run.result();
  await save(name, run.workflowId);
}
if (wanted('compacted')) {
  // A model phase whose history is over the threshold: modelStep says so, compactStep runs.
  const conversation = await kit.client.conversation('compacted');
  await conversation.say(`first ${'x'.repeat(1500)}`);
  await conversation.say(`second ${'x'.repeat(1500)}`);
  const run = await conversation.ask('record compaction');
  await run.result();
  await save('compacted', run.workflowId);
}
if (wanted('reclaimed')) {
  // Reset at the last workflow task while the tool runs: the new run's first write meets the
  // old claim (LostClaim), it claims the turn again and finishes it.
  const run = await kit.client.run('reclaimed', 'record reset');
  await until(async () => (await run.toolExecutions()).some((e) => e.status === 'running'));
  await resetWorkflow(kit.client.temporal, run.workflowId, 'last');
  await run.result();
  held.open();
  await save('reclaimed', run.workflowId);
}
if (wanted('approved')) {
  // wire awaits approval while echo runs; pause, approve (the turn pauses before wire runs),
  // steer while paused, resume: wire runs, echo's result is kept, the steering goes to the model.
  const run = await kit.client.run('approved', 'record approvals');
  await until(async () => (await run.pendingApprovals()).length === 1);
  const [pending] = await run.pendingApprovals();
  await run.pause({ principal: 'ops' });
  await run.approve(pending!.toolCallId, { principal: 'ops', note: 'ok' });
  await until(async () => (await run.status()) === 'paused');
  await run.steer('Answer briefly.', { principal: 'ops' });
  await run.resume({ principal: 'ops' });
  await run.result();
  await save('approved', run.workflowId);
}
if (wanted('paused-output')) {
  // The boundary before the output: a pause asked during the last model call stops the turn
  // there; steering sent while paused is applied after the resume and the model answers again.
  const run = await kit.client.run('paused_output', 'record the output boundary');
  await until(async () => (await run.events()).some((e) => e.type === 'model.requested'));
  await run.pause({ principal: 'ops' });
  answering.open();
  await until(async () => (await run.status()) === 'paused');
  await run.steer('Say it was steered.', { principal: 'ops' });
  await run.resume({ principal: 'ops' });
  await run.result();
  await save('paused-output', run.workflowId);
}
if (wanted('slowbusy')) {
  // A claim refused with lane_busy that outlives its workflow task (17 s): the released
  // PATCH_SIGNALLED_WAITS is checked right after that local activity's result.
  const conversation = await kit.client.conversation('slowbusy');
  const first = await conversation.ask('occupy the lane');
  await until(async () => (await first.toolExecutions()).some((e) => e.status === 'running'));
  const second = await conversation.ask('wait for the lane', { start: false });
  slowClaims.add(second.turnId);
  await second.start();
  await new Promise((resolve) => setTimeout(resolve, 20_000));
  busy.open();
  await first.result();
  await second.result();
  await save('slowbusy', second.workflowId);
}
// The lane workflow: a message delivered to an idle conversation wakes it (a continuation
// turn), a second message arrives while that turn runs; the lane idles and closes. `lane` was
// recorded on the lane as released before decision 33, `lane-0.5` with its patch.
for (const name of ['lane', 'lane-0.5'].filter(wanted)) {
  const conversation = await kit.client.conversation('laned');
  await conversation.ask('first').then((run) => run.result());
  await kit.client.sendMessage(conversation.id, 'one', { key: `record-${name}-1` });
  await kit.client.sendMessage(conversation.id, 'two', { key: `record-${name}-2` });
  const lane = kit.client.temporal.workflow.getHandle(`turnkit-lane-${conversation.id}`);
  await until(async () => (await lane.describe()).status.name !== 'RUNNING');
  await save(name, lane.workflowId);
}
if (wanted('lane-post')) {
  // The inbox (decision 41): a post starts the lane and a turn (update-with-start), another
  // one makes the turn wait on a tool; a post queued and one steered meanwhile; then the lane
  // delivers nothing new, runs the queued post's turn, idles and closes.
  const conversation = await kit.client.conversation('posted');
  const started = await conversation.post('first', { requestId: 'record-1' });
  await until(async () => (await kit.store.loadTurn(started.turnId!)).status === 'completed');
  const busy = await conversation.post('wait here', { requestId: 'record-2' });
  await until(async () =>
    (await kit.store.listToolExecutions({ turnIds: [busy.turnId!] })).some((e) => e.status === 'running'),
  );
  await conversation.post('and this', { requestId: 'record-3', policy: 'queue' });
  await conversation.post('steer it', { requestId: 'record-4', policy: 'steer' });
  posting.open();
  const lane = kit.client.temporal.workflow.getHandle(`turnkit-lane-${conversation.id}`);
  await until(async () => (await lane.describe()).status.name !== 'RUNNING');
  await save('lane-post', lane.workflowId);
}
if (wanted('querybusy')) {
  // Release 0.5: the same slow lane_busy claim, with a query every 50 ms while it is out (the
  // Temporal UI's current details, `temporal workflow query --type state`): the queries are
  // answered in the workflow tasks that heartbeat while the local activity runs, which split
  // its marker from the commands after it. Nothing is asked with `patched()` there any more.
  const conversation = await kit.client.conversation('slowbusy');
  const first = await conversation.ask('occupy the lane');
  await until(async () => (await first.toolExecutions()).some((e) => e.status === 'running'));
  const second = await conversation.ask('wait for the lane', { start: false });
  slowClaims.add(second.turnId);
  await second.start();
  const handle = kit.client.temporal.workflow.getHandle(second.workflowId);
  let answered = 0;
  const storm = setInterval(() => {
    void Promise.all([handle.query('__temporal_workflow_metadata'), handle.query('state')]).then(
      () => (answered += 1),
      () => undefined,
    );
  }, 50);
  await new Promise((resolve) => setTimeout(resolve, 20_000));
  busy.open();
  await first.result();
  await second.result();
  clearInterval(storm);
  console.log(`querybusy: ${answered} query pairs answered`);
  await save('querybusy', second.workflowId);
}
if (wanted('routed')) {
  // Decision 43: a provider's model calls on a queue of their own (the claim's `modelRoute`),
  // and a chain that falls over from that queue to the turn's own (`ModelFallback`).
  let calls = 0;
  const routedKit = await startKit({
    agents: [defineAgent({ name: 'routed', model: ['sc:first', 'other:second'] })],
    model: new ScriptedModel({
      routed: () =>
        ++calls === 1 ? { error: { status: 429, message: 'rate limited' } } : 'served by the second',
    }),
    worker: { models: { sc: { perSecond: 100 } } },
    turnSettings: { maxProviderAttempts: 1 },
  });
  const run = await routedKit.client.run('routed', 'record routed');
  await run.result();
  const history = await routedKit.client.temporal.workflow.getHandle(run.workflowId).fetchHistory();
  writeFileSync(
    new URL('../test/fixtures/histories/routed.json', import.meta.url),
    `${historyToJSON(history)}\n`,
  );
  console.log(`recorded routed: ${history.events?.length} events`);
  await routedKit.stop();
}
// A schedule's firing (issue 31): its activity writes the turn, the turn runs as its child.
// `scheduled-cancelled`: under `cancel_other`, a second trigger cancels the firing while its
// turn awaits an approval (the cancel activity, then the child's end).
const firingOf = async (schedule: Awaited<ReturnType<typeof kit.client.schedule>>, index: number) => {
  await until(async () => (await schedule.describe()).recentFirings.length > index);
  return (await schedule.describe()).recentFirings[index]!.workflowId;
};
if (wanted('scheduled')) {
  const schedule = await kit.client.schedule('laned', 'record a firing', {
    id: `record-${Date.now().toString(36)}`,
    cron: '0 0 1 1 *',
  });
  await schedule.trigger();
  const firing = await firingOf(schedule, 0);
  await kit.client.temporal.workflow.getHandle(firing).result();
  await save('scheduled', firing);
  await schedule.delete();
}
if (wanted('scheduled-cancelled')) {
  const schedule = await kit.client.schedule('approved', 'record a cancelled firing', {
    id: `record-cancel-${Date.now().toString(36)}`,
    cron: '0 0 1 1 *',
    overlap: 'cancel_other',
  });
  await schedule.trigger();
  const firing = await firingOf(schedule, 0);
  const turns = async () => (await schedule.runs()).length;
  await until(async () => (await turns()) === 1);
  const [first] = await schedule.runs();
  await until(async () => (await first!.pendingApprovals()).length === 1);
  await schedule.trigger();
  await kit.client.temporal.workflow.getHandle(firing).result();
  await save('scheduled-cancelled', firing);
  await until(async () => (await turns()) === 2);
  const [second] = (await schedule.runs()).filter((run) => run.turnId !== first!.turnId);
  await schedule.delete();
  await second!.cancel();
  await second!.result();
}
await kit.stop();
await plain.close();
