import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defineAgent } from '../../src/agents/agent.js';
import { defineSkill } from '../../src/agents/skill.js';
import {
  outputPolicy,
  outputPolicyFromFile,
  requireImage,
  requireMediaAnalysis,
} from '../../src/agents/output-policy.js';
import { checkOutputPolicy } from '../../src/engine/output/check-output-policy.js';
import { ArgumentError, ConfigError } from '../../src/errors.js';
import { ScriptedImageModel } from '../../src/models/image.js';
import type { ModelRequest } from '../../src/models/types.js';
import type { ScriptedStep } from '../../src/models/scripted-model.js';
import { ScriptedModel, toolCall } from '../../src/models/scripted-model.js';
import { painter } from '../../src/specialists/painter.js';
import type { MessageRecord } from '../../src/store/types.js';
import type { TestKit } from '../helpers/turnkit.js';
import { startKit } from '../helpers/turnkit.js';

const dir = mkdtempSync(join(tmpdir(), 'turnkit-policy-'));
const toneFile = join(dir, 'tone.md');
writeFileSync(
  toneFile,
  '---\nname: polite_tone\ndescription: Be polite.\n---\nNever be rude to the reader.\n',
);

const textOf = (message: MessageRecord) =>
  message.content.map((part) => (part.type === 'text' ? part.text : '')).join('');

const judged = (answer: (call: number) => ScriptedStep, verdicts: (call: number) => ScriptedStep) => {
  let answers = 0;
  let judgements = 0;
  return (request: ModelRequest): ScriptedStep =>
    request.metadata.purpose === 'output_policy' ? verdicts(judgements++) : answer(answers++);
};

const ownClient = new ScriptedModel({
  filed: judged(
    (call) => (call === 0 ? 'You fool, it is 42.' : 'It is 42, kindly.'),
    (call) =>
      call === 0
        ? '```json\n{"approved": false, "violations": [{"message": "calls the reader a fool"}]}\n```'
        : '{"approved": true, "violations": []}',
  ),
});

const model = new ScriptedModel({
  coded: judged(
    () => 'Dogs are great.',
    () => ({ text: '', outputData: { approved: true, violations: [] } }),
  ),
  priced: judged(
    () => 'Fine.',
    () => ({
      text: '{"approved": true, "violations": []}',
      usage: { inputTokens: 100_000, outputTokens: 10_000 },
    }),
  ),
  broke: judged(
    () => 'Fine.',
    () => ({
      text: '{"approved": true, "violations": []}',
      usage: { inputTokens: 1_000_000, outputTokens: 0 },
    }),
  ),
  garbled: judged(
    () => 'Fine.',
    (call) => (call === 0 ? 'Looks fine to me!' : '{"ok": true}'),
  ),
  runtimeDefault: judged(
    () => 'Fine.',
    () => '{"approved": true, "violations": []}',
  ),
  imageless: () => 'No picture, sorry.',
  retried: (() => {
    let secondJudge = 0;
    return (request: ModelRequest): ScriptedStep => {
      if (request.metadata.purpose !== 'output_policy') return 'Fine.';
      if (request.instructions.includes('"paid"'))
        return {
          text: '{"approved": true, "violations": []}',
          usage: { inputTokens: 100_000, outputTokens: 0 },
        };
      // The second judge's provider fails once (retryable): the audit activity is retried.
      return secondJudge++ === 0 ? { error: { status: 503 } } : '{"approved": true, "violations": []}';
    };
  })(),
  pictured: () => toolCall('paint_image', { prompt: 'a cat' }),
  // Loads the editor skill when the task asks for it, then answers; its judge rejects.
  skilled: (request) => {
    if (request.metadata.purpose === 'output_policy')
      return '{"approved": false, "violations": [{"message": "uses jargon"}]}';
    const task = request.messages.find((message) => message.role === 'user')?.content ?? '';
    const loaded = request.messages.some((message) => message.role === 'tool');
    return task.includes('edit') && !loaded ? toolCall('load_skill', { key: 'editor' }) : 'Synergy!';
  },
});

const editor = defineSkill({
  key: 'editor',
  description: 'House style for edited copy.',
  content: 'Write plainly.',
  outputPolicy: outputPolicy({ name: 'plain_words', content: 'No jargon.' }),
});

const agents = [
  defineAgent({
    name: 'coded',
    model: 'answer-model',
    outputPolicy: outputPolicy({
      name: 'no_cats',
      content: 'Never mention cats.',
      model: 'judge-model',
      thinking: { effort: 'high' },
    }),
  }),
  defineAgent({
    name: 'filed',
    model: 'answer-model',
    client: ownClient,
    outputPolicy: toneFile,
    outputPolicyModel: 'agent-judge',
    outputRetries: 1,
  }),
  defineAgent({
    name: 'priced',
    outputPolicy: outputPolicy({ content: 'Be correct.', model: 'judge-priced' }),
  }),
  defineAgent({
    name: 'broke',
    limits: { maxSpend: 1 },
    outputPolicy: outputPolicy({ content: 'Be correct.', model: 'judge-priced' }),
  }),
  defineAgent({
    name: 'garbled',
    outputPolicyMode: 'report',
    outputPolicy: [
      outputPolicy({ name: 'first', content: 'Rule one.' }),
      outputPolicy({ name: 'second', content: 'Rule two.' }),
    ],
  }),
  defineAgent({
    name: 'runtimeDefault',
    model: 'answer-model',
    outputPolicy: outputPolicy({ content: 'Be correct.' }),
  }),
  defineAgent({
    name: 'retried',
    outputPolicy: [
      outputPolicy({ name: 'paid', content: 'Be correct.', model: 'judge-priced' }),
      outputPolicy({ name: 'flaky', content: 'Be kind.' }),
    ],
  }),
  defineAgent({
    name: 'imageless',
    outputPolicyMode: 'report',
    outputPolicy: [requireImage(), requireMediaAnalysis()],
  }),
  defineAgent({ name: 'skilled', outputPolicyMode: 'report', availableSkills: [editor] }),
  painter({
    name: 'pictured',
    imageModel: new ScriptedImageModel(),
    gate: () => true,
    outputPolicy: requireImage(),
  }),
];

let kit: TestKit;
beforeAll(async () => {
  kit = await startKit({
    agents,
    model,
    runtime: {
      outputPolicyModel: 'runtime-judge',
      cost: { costRates: { 'judge-priced': { input: 2, output: 10 } } },
    },
  });
});
afterAll(async () => kit?.stop());

const judgeCalls = (client: ScriptedModel, agent: string) =>
  client.callsFor(agent).filter((call) => call.request.metadata.purpose === 'output_policy');

describe('LLM-judged output policies', () => {
  it('CORE-22 a code policy is an internal model call with purpose output_policy: its own model and thinking, no tools, a JSON verdict schema, the output as one JSON user message; approved is clean', async () => {
    const run = await kit.client.run('coded', 'Tell me about dogs');
    const turn = await run.result();
    expect(turn.status).toBe('completed');
    expect(await run.policyAudit()).toEqual({ clean: true, violations: [] });
    const [judge] = judgeCalls(model, 'coded');
    expect(judge!.request).toMatchObject({
      model: 'judge-model',
      thinking: { effort: 'high' },
      tools: [],
      messages: [{ role: 'user', content: JSON.stringify('Dogs are great.') }],
      metadata: { turnId: turn.id, purpose: 'output_policy' },
      outputSchema: { required: ['approved', 'violations'] },
    });
    expect(judge!.request.instructions).toContain('Never mention cats.');
    const types = (await run.events()).map((event) => event.type);
    expect(types).toContain('output_policy.model.requested');
    expect(types).toContain('output_policy.model.completed');
    expect(types.indexOf('output_policy.model.completed')).toBeLessThan(types.indexOf('turn.completed'));
  });

  it("CORE-22 a markdown file policy judged on the agent's own client and outputPolicyModel, with the default low thinking; fenced JSON is accepted; violations default to the policy name; the revision embeds the policy", async () => {
    const run = await kit.client.run('filed', 'What is the answer?');
    const turn = await run.result();
    expect(turn.status).toBe('completed');
    expect(turn.outputText).toBe('It is 42, kindly.');
    const judges = judgeCalls(ownClient, 'filed');
    expect(judges).toHaveLength(2);
    expect(judges[0]!.request).toMatchObject({ model: 'agent-judge', thinking: { effort: 'low' } });
    expect(judges[0]!.request.instructions).toContain('Never be rude to the reader.');
    expect(judges[0]!.request.instructions).not.toContain('description:');
    expect(judgeCalls(model, 'filed')).toHaveLength(0);
    const revision = (await run.transcript()).find((m) => m.metadata['source'] === 'output_policy')!;
    expect(textOf(revision)).toContain('<skill key="polite_tone">\nNever be rude to the reader.\n</skill>');
    expect(textOf(revision)).toContain('1. polite_tone: calls the reader a fool');
    expect(await run.policyAudit()).toEqual({ clean: true, violations: [] });
  });

  it('CORE-22 without a policy or agent model the judge uses the runtime outputPolicyModel', async () => {
    await (await kit.client.run('runtimeDefault', 'x')).result();
    expect(judgeCalls(model, 'runtimeDefault')[0]!.request.model).toBe('runtime-judge');
  });

  it('CORE-22 the judge call is charged to the turn through the cost rates; over maxSpend it fails the run with BudgetError', async () => {
    const run = await kit.client.run('priced', 'x');
    const turn = await run.result();
    expect(turn.status).toBe('completed');
    // 100 000 input tokens at $2/M + 10 000 output tokens at $10/M.
    expect(turn.cost).toBeCloseTo(0.3, 6);
    expect(turn.usage).toMatchObject({ input_tokens: 100_000, output_tokens: 10_000 });
    const completed = (await run.events()).find((e) => e.type === 'output_policy.model.completed')!;
    expect(completed.payload['cost']).toBeCloseTo(0.3, 6);

    const broke = await (await kit.client.run('broke', 'x')).result();
    expect(broke.status).toBe('failed');
    expect(broke.error).toMatchObject({ message: 'cost limit reached' });
    expect(broke.error!.class).toMatch(/BudgetError$/);
    expect(broke.cost).toBeCloseTo(2, 6);
  });

  it('CORE-22 a retried audit reuses the verdicts already stored: a judge is neither called nor charged twice', async () => {
    const run = await kit.client.run('retried', 'x');
    const turn = await run.result();
    expect(turn.status).toBe('completed');
    const judges = judgeCalls(model, 'retried').map((call) =>
      call.request.instructions.includes('"paid"') ? 'paid' : 'flaky',
    );
    expect(judges).toEqual(['paid', 'flaky', 'flaky']);
    // 100 000 input tokens at $2/M, once.
    expect(turn.cost).toBeCloseTo(0.2, 6);
    expect(await run.policyAudit()).toEqual({ clean: true, violations: [] });
  });

  it('CORE-22 a judge answering non-JSON or the wrong shape is a recorded violation, never a stuck turn', async () => {
    const run = await kit.client.run('garbled', 'x');
    const turn = await run.result();
    expect(turn.status).toBe('completed');
    expect(await run.policyAudit()).toEqual({
      clean: false,
      violations: [
        { rule: 'first', message: 'output policy first returned invalid JSON' },
        {
          rule: 'second',
          message: 'output policy second returned an invalid verdict (expected {approved, violations})',
        },
      ],
    });
  });

  it('CORE-22 requireImage and requireMediaAnalysis demand an image / a media analysis from the turn', async () => {
    const missing = await kit.client.run('imageless', 'Draw');
    await missing.result();
    expect(await missing.policyAudit()).toEqual({
      clean: false,
      violations: [
        { rule: 'require_image', message: 'the output must include an image' },
        { rule: 'require_media_analysis', message: 'the output must include a media analysis' },
      ],
    });
    const pictured = await kit.client.run('pictured', 'Draw a cat');
    expect((await pictured.result()).status).toBe('completed');
    expect(await pictured.policyAudit()).toEqual({ clean: true, violations: [] });
  });

  it('CORE-22 a policy file that does not exist is a ConfigError at definition; a string that is not a policy file is an ArgumentError', () => {
    expect(() => outputPolicyFromFile(join(dir, 'missing.md'))).toThrow(ConfigError);
    expect(() => defineAgent({ name: 'x', outputPolicy: join(dir, 'missing.md') })).toThrow(ConfigError);
    expect(() => defineAgent({ name: 'x', outputPolicy: 'be nice' })).toThrow(ArgumentError);
    expect(() => defineAgent({ name: 'x', outputPolicy: 42 as never })).toThrow(ArgumentError);
    expect(() => outputPolicy({ content: '' })).toThrow(ArgumentError);
    writeFileSync(join(dir, 'empty.md'), '---\nname: e\n---\n');
    expect(() => outputPolicyFromFile(join(dir, 'empty.md'))).toThrow(ConfigError);
  });

  it('CORE-22 checkOutputPolicy runs constraints and judges outside a turn', async () => {
    const client = new ScriptedModel({
      '*': () => '{"approved": false, "violations": [{"rule": "brevity", "message": "too long"}]}',
    });
    const audit = await checkOutputPolicy('a very long answer', {
      constraints: [
        (output) => (output === 'a very long answer' ? null : 'unexpected'),
        outputPolicy({ content: 'Be brief.' }),
      ],
      client,
      model: 'judge',
    });
    expect(audit).toEqual({ clean: false, violations: [{ rule: 'brevity', message: 'too long' }] });
    expect(client.calls[0]!.request).toMatchObject({
      model: 'judge',
      metadata: { purpose: 'output_policy' },
    });
    await expect(
      checkOutputPolicy('x', { constraints: [outputPolicy({ content: 'Be brief.' })] }),
    ).rejects.toThrow(ConfigError);
  });

  it("CORE-22 a skill's output policy applies once a turn loaded the skill, and only then", async () => {
    const plain = await kit.client.run('skilled', 'Just answer');
    expect((await plain.result()).status).toBe('completed');
    expect(await plain.policyAudit()).toEqual({ clean: true, violations: [] });
    expect(judgeCalls(model, 'skilled')).toHaveLength(0);

    const edited = await kit.client.run('skilled', 'Please edit this');
    expect((await edited.result()).status).toBe('completed');
    expect(await edited.policyAudit()).toEqual({
      clean: false,
      violations: [expect.objectContaining({ rule: 'plain_words', message: 'uses jargon' })],
    });
    expect(judgeCalls(model, 'skilled')).toHaveLength(1);
  });
});
