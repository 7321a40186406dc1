/**
 * `client.erase`'s refusals of bad input, before anything is read or written: each a typed
 * error naming what is wrong (no Temporal server needed: the client's connection stays unused).
 */
import { Client } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defineAgent } from '../../src/agents/agent.js';
import { AgentRegistry } from '../../src/agents/registry.js';
import { TurnKitClient } from '../../src/client/turnkit-client.js';
import { createErasure } from '../../src/erasure/erasure-steps.js';
import { ArgumentError } from '../../src/errors.js';
import type { SqlStore } from '../../src/store/sql/sql-store.js';
import { openStore } from '../../src/store/index.js';
import type { Store } from '../../src/store/types.js';
import { tempSqliteUrl } from '../helpers/turnkit.js';

const agents = new AgentRegistry([defineAgent({ name: 'erase_input' })]);
let store: Store;
let client: TurnKitClient;

beforeAll(async () => {
  store = await openStore(tempSqliteUrl('erase-input'));
  client = new TurnKitClient({ store, agents, temporal: new Client() });
});
afterAll(async () => {
  await store?.close();
});

describe('privacy: erase input', () => {
  it.each([
    [undefined, 'erase needs { principal } or { conversationId }'],
    [{}, 'erase needs exactly one of principal and conversationId, got neither'],
    [{ principal: 'a', conversationId: 'conv_1' }, 'got principal, conversationId'],
    [{ principal: null }, 'the principal must not be null'],
    [{ conversationId: '' }, 'conversationId must be a non-empty string'],
    [{ user: 'a' }, 'got user'],
  ])('privacy: erase(%j) is an ArgumentError', async (subject, message) => {
    const error = await client.erase(subject as never).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ArgumentError);
    expect((error as Error).message).toContain(message);
  });

  it('privacy: a bad batch size or erasure id is an ArgumentError', async () => {
    await expect(client.erase({ principal: 'a' }, { batchSize: 0 })).rejects.toThrow(
      /batchSize must be a whole number from 1 to 10000, got 0/,
    );
    await expect(client.erase({ principal: 'a' }, { erasureId: 'x; drop' })).rejects.toBeInstanceOf(
      ArgumentError,
    );
  });

  it('privacy: an erasure id names one erasure: a running erasure of another subject refuses it', async () => {
    const sql = (store as SqlStore).statements();
    await createErasure(sql, 'erasure_00aa', { principal: { user: 'a' } }, 10);
    await createErasure(sql, 'erasure_00aa', { principal: { user: 'a' } }, 10);
    await expect(createErasure(sql, 'erasure_00aa', { conversationId: 'conv_1' }, 10)).rejects.toThrow(
      new ArgumentError('erasure erasure_00aa is erasing another subject'),
    );
  });
});
