/**
 * The provider boundary: the engine talks to models only through `ModelClient`.
 * Vendors live in this folder and nowhere else.
 */
import type { ContentPart, Json, JsonObject } from '../store/types.js';
import type { ModelMedia } from './media.js';

/** A provider-neutral message (spec §3.7 projection). */
export type ModelMessage =
  | {
      role: 'user';
      content: string;
      /** Images and files of the message, sent as real image / file parts. */
      media?: ModelMedia[];
    }
  | {
      role: 'assistant';
      content: string;
      toolCalls?: { id: string; name: string; arguments: JsonObject }[];
    }
  | { role: 'tool'; content: string; toolCallId: string; toolName: string };

export interface ModelToolSpec {
  name: string;
  description: string;
  /** JSON Schema of the tool's arguments (an object schema). */
  inputSchema: JsonObject;
}

export interface Thinking {
  effort?: 'low' | 'medium' | 'high';
  budget?: number;
}

export interface ModelRequest {
  model: string;
  /** Stable system prompt (cacheable). */
  instructions: string;
  /** Per-call tail of the system prompt (subject, live context, environment). */
  dynamicInstructions: string;
  messages: ModelMessage[];
  tools: ModelToolSpec[];
  thinking?: Thinking | null;
  /** JSON Schema for structured output. */
  outputSchema?: JsonObject | null;
  temperature?: number;
  metadata: { turnId: string; conversationId: string; agentName: string; purpose?: string };
}

/** Token counters of one model call, plus a provider-reported cost when there is one. */
export interface ModelUsage {
  inputTokens: number;
  outputTokens: number;
  cachedTokens?: number;
  cacheWriteTokens?: number;
  thinkingTokens?: number;
  /** USD, when the provider reports it. */
  cost?: number;
}

export interface ModelResult {
  /** Ordered parts: thinking, text and tool_call parts as the model produced them. */
  parts: ContentPart[];
  usage: ModelUsage;
  model?: string;
  finishReason?: string;
  outputData?: Json;
  providerMessageId?: string;
}

/** A piece of the answer as the provider streams it. */
export interface ModelDelta {
  type: 'text' | 'reasoning';
  text: string;
}

export interface ModelCallOptions {
  /** Aborted when the turn is cancelled or the activity times out. */
  signal: AbortSignal;
  /** Called while the request is in flight so the caller can heartbeat. */
  onProgress?: () => void;
  /**
   * Given, the client streams: each piece of text or reasoning as it arrives. The returned
   * result is still the whole answer, and it is what gets stored.
   */
  onDelta?: (delta: ModelDelta) => void;
}

export interface ModelClient {
  /**
   * The model id turns use when nothing else names one (no agent, turn or runtime model, no
   * TURNKIT_MODEL): the scripted model's is `scripted`, so an offline run never wears a real
   * model's name or price.
   */
  readonly defaultModel?: string;
  /** Raise ModelAccessError for configuration that can never work (unknown model, no key). */
  validate?(model: string): void | Promise<void>;
  chat(request: ModelRequest, options: ModelCallOptions): Promise<ModelResult>;
}
