/**
 * What a person sees in the stock Temporal Web UI, in a real browser (Debian's chromium via
 * playwright-core): the workflow list filtered by `TurnKitAgent`, and a turn's page with its
 * summary, its current details and its activity summaries. Screenshots go to test-results/.
 * In CI a missing chromium fails this suite (.ci/run installs it); elsewhere it is skipped
 * with a warning.
 */
import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineAgent } from '../../src/agents/agent.js';
import { defineTool } from '../../src/agents/tool.js';
import { ScriptedModel } from '../../src/models/scripted-model.js';
import type { TurnRecord } from '../../src/store/types.js';
import { turnWorkflowId } from '../../src/workflows/contract.js';
import type { TestKit } from '../helpers/turnkit.js';
import { startKit } from '../helpers/turnkit.js';
import { temporalNamespace } from '../helpers/temporal.js';

const CHROMIUM = process.env['CHROMIUM_PATH'] ?? '/usr/bin/chromium';
const UI = (process.env['TEMPORAL_UI_URL'] ?? 'http://127.0.0.1:8233').replace(/\/$/, '');
const SHOTS = join(process.cwd(), 'test-results', 'ui');
const available = existsSync(CHROMIUM);
if (!available && process.env['CI']) throw new Error(`chromium is not at ${CHROMIUM}: .ci/run installs it`);
if (!available)
  console.warn(`turnkit: WARNING: no chromium at ${CHROMIUM}; the Temporal UI suite is skipped`);

// A name of its own per run, so the filtered list holds exactly this run's turns.
const agentName = `ui_agent_${Date.now().toString(36)}`;
const lookup = defineTool({
  name: 'lookup_fact',
  description: 'Looks a fact up.',
  input: z.object({ topic: z.string() }),
  execute: ({ topic }) => ({ topic, fact: 'workflows are durable' }),
});
const model = new ScriptedModel({
  [agentName]: (request) =>
    request.messages.some((message) => message.role === 'tool')
      ? { text: 'Durable, as looked up.', usage: { inputTokens: 40, outputTokens: 8 } }
      : {
          toolCalls: [{ name: 'lookup_fact', arguments: { topic: 'durability' } }],
          usage: { inputTokens: 20, outputTokens: 5 },
        },
});

let kit: TestKit;
let browser: Browser;
let page: Page;
let turn: TurnRecord;

/** The page's text, with the frames the UI renders markdown into (summary, details). */
async function visibleText(): Promise<string> {
  const texts = await Promise.all(
    page.frames().map((frame) =>
      frame
        .locator('body')
        .innerText({ timeout: 5_000 })
        .catch(() => ''),
    ),
  );
  return texts.join('\n');
}

describe.skipIf(!available)('the stock Temporal UI shows what a turn did', () => {
  beforeAll(async () => {
    mkdirSync(SHOTS, { recursive: true });
    kit = await startKit({
      agents: [defineAgent({ name: agentName, tools: [lookup], limits: { maxIterations: 7 } })],
      model,
    });
    const run = await kit.client.run(agentName, 'Explain why durable execution matters');
    turn = await run.result();
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
    page = await browser.newPage({ viewport: { width: 1440, height: 1000 } });
  });
  afterAll(async () => {
    await browser?.close();
    await kit?.stop();
  });

  it('web ui: the workflow list filtered by TurnKitAgent lists the turn', async () => {
    const query = encodeURIComponent(`TurnKitAgent="${agentName}"`);
    await page.goto(`${UI}/namespaces/${temporalNamespace()}/workflows?query=${query}`);
    const row = page.getByText(turnWorkflowId(turn.id));
    await row.first().waitFor({ timeout: 30_000 });
    await page.screenshot({ path: join(SHOTS, 'workflow-list.png'), fullPage: true });
    expect(await page.getByText('1 Workflow', { exact: true }).count()).toBe(1);
  });

  it("web ui: the turn's page shows the activity summaries on its timeline, and its summary and details", async () => {
    await page.goto(`${UI}/namespaces/${temporalNamespace()}/workflows/${turnWorkflowId(turn.id)}`);
    await page.getByText('claimStep • claim, model call 1').first().waitFor({ timeout: 30_000 });
    await page.screenshot({ path: join(SHOTS, 'turn-timeline.png'), fullPage: true });
    const timeline = await page.locator('body').innerText();
    expect(timeline).toContain('toolCall • tool lookup_fact');
    expect(timeline).toContain('modelStep • model call 2');

    // The summary, the static details and the live current details (a query the worker answers).
    await page.getByText('User Metadata', { exact: true }).first().click();
    await expect.poll(visibleText, { timeout: 30_000 }).toContain('iteration 2 of 7');
    await page.screenshot({ path: join(SHOTS, 'turn-metadata.png'), fullPage: true });
    const metadata = await visibleText();
    expect(metadata).toContain(`${agentName}: Explain why durable execution matters`);
    expect(metadata).toContain(`root ${turn.rootTurnId}`);
    expect(metadata).toContain('tokens 73');
    expect(metadata).toContain('last step: model call 2 → output');
  });
});
