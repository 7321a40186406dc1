/**
 * Layer: the decisions of a tool call alone (decision 85), no store and no Temporal: each reads
 * the call through a `CallView` and answers a verdict. The same calls through the pipeline, on
 * the dev server and both stores, are in approvals, tool-policy, budget-completion and
 * tools-phase tests.
 */
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineAgent } from '../../src/agents/agent.js';
import type { ToolDefinition } from '../../src/agents/tool.js';
import { defineTool } from '../../src/agents/tool.js';
import { AuthorizationError, LostClaim } from '../../src/errors.js';
import type { ToolExecutionRecord, TurnRecord } from '../../src/store/types.js';
import type { TurnState } from '../../src/engine/step/turn-state.js';
import { decideApproval } from '../../src/engine/tools/approval.js';
import { spendVerdict } from '../../src/engine/tools/budget-completion.js';
import {
  failureVerdict,
  leftRunning,
  retryVerdict,
  unrunnable,
} from '../../src/engine/tools/tool-failure.js';
import type { CallView, ToolCall } from '../../src/engine/tools/verdict.js';
import { OUTCOME_UNKNOWN } from '../../src/engine/step/result-texts.js';

const lookup = defineTool({
  name: 'lookup',
  description: 'Looks a word up.',
  input: z.object({ word: z.string() }),
  recovery: 'replaySafe',
  execute: ({ word }) => ({ word }),
});
const send = defineTool({
  name: 'send',
  description: 'Sends a letter.',
  input: z.object({ to: z.string() }),
  execute: ({ to }) => ({ to }),
});
const agent = defineAgent({ name: 'verdicts', instructions: 'Test.', tools: [lookup, send] });

function view(
  call: Partial<ToolCall>,
  tool: ToolDefinition | undefined,
  state: Partial<TurnState> = {},
): CallView {
  const full = {
    type: 'tool_call',
    id: 'call_1',
    name: tool?.name ?? 'missing',
    arguments: {},
    ...call,
  } as ToolCall;
  return {
    call: full,
    tool,
    turn: { id: 'turn_1', options: {} } as unknown as TurnRecord,
    agent,
    state: { phase: 'tools', parts: [full], ...state } as TurnState,
    history: () => Promise.resolve([]),
    toolFor: (name) => Promise.resolve(agent.effectiveTools.find((t) => t.name === name)),
    executionOf: () => Promise.resolve(undefined),
    executionsOf: () => Promise.resolve([]),
    warn: () => undefined,
  };
}

const row = (status: ToolExecutionRecord['status']) => ({ status }) as ToolExecutionRecord;

describe('tool call verdicts (decision 85)', () => {
  it('verdict: approval: no decision holds the call; approval runs it with its event; a rejection closes it with the reason', () => {
    const v = view({}, send);
    expect(decideApproval(v, undefined)).toEqual({ kind: 'hold' });
    const approved = decideApproval(v, { decision: 'approved', principal: 'ada' });
    expect(approved.kind).toBe('run');
    expect(approved.kind === 'run' && approved.events?.map((e) => e.type)).toEqual(['tool_call.approved']);
    const rejected = decideApproval(v, { decision: 'rejected', principal: 'ada', reason: 'not today' });
    expect(rejected).toMatchObject({
      kind: 'close',
      closing: {
        status: 'failed',
        payload: { message: 'rejected by ada: not today', details: { rejected: true } },
      },
    });
  });

  it('verdict: budget completion: a sibling of the save that has not run is skipped; the save and a finished sibling are not', () => {
    const inCompletion = { budget_completion_call_id: 'call_save' };
    expect(spendVerdict(view({}, send, inCompletion), undefined)).toMatchObject({
      kind: 'close',
      closing: {
        status: 'cancelled',
        payload: { skipped: true, message: 'not executed: spend limit reached' },
      },
    });
    expect(spendVerdict(view({ id: 'call_save' }, send, inCompletion), undefined)).toEqual({ kind: 'run' });
    expect(spendVerdict(view({}, send, inCompletion), row('completed'))).toEqual({ kind: 'run' });
    expect(spendVerdict(view({}, send), undefined)).toEqual({ kind: 'run' });
  });

  it('verdict: failure: an unknown tool or bad arguments fail unrun; a row left running is interrupted unless replay-safe', () => {
    expect(unrunnable(view({ name: 'missing' }, undefined))).toMatchObject({
      closing: { status: 'failed', payload: { message: 'unknown tool: missing' } },
    });
    expect(unrunnable(view({ arguments_error: 'bad json' }, send))).toMatchObject({
      closing: { payload: { message: 'bad json' } },
    });
    expect(leftRunning(lookup)).toEqual({ kind: 'run' });
    expect(leftRunning(send)).toMatchObject({
      closing: { status: 'interrupted', payload: { message: OUTCOME_UNKNOWN } },
    });
  });

  it('verdict: failure: a lost claim or an aborted attempt is delegated; a denial closes; a replay-safe error is counted, then retried or closed', async () => {
    const lost = new LostClaim('gone');
    expect(await failureVerdict(view({}, send), send, lost, false)).toEqual({
      kind: 'delegate',
      error: lost,
    });
    const boom = new Error('boom');
    expect(await failureVerdict(view({}, send), send, boom, true)).toEqual({ kind: 'delegate', error: boom });
    expect(await failureVerdict(view({}, send), send, new AuthorizationError('no'), false)).toMatchObject({
      closing: { status: 'failed', payload: { message: 'no', details: { authorization_denied: true } } },
    });
    expect(await failureVerdict(view({}, send), send, boom, false)).toMatchObject({
      closing: { status: 'failed' },
    });
    expect(await failureVerdict(view({}, lookup), lookup, boom, false)).toEqual({
      kind: 'delegate',
      error: boom,
      retry: true,
    });
    const again = retryVerdict(boom, 1, 3);
    expect(again.kind === 'delegate' && (again.error as Error & { retryable: boolean }).retryable).toBe(true);
    expect(retryVerdict(boom, 3, 3)).toMatchObject({
      closing: { status: 'failed', payload: { message: 'boom' } },
    });
  });
});
