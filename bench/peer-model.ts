/**
 * The model script of the side-by-side bench (bench/peer-bench.ts), the same on both sides:
 * each side wraps it in its own `MockLanguageModelV4` (from `ai/test`, ai 7.0.173 on both).
 * Type imports only, so the comparison package (bench/peer-ai-sdk/) can load this file too.
 *
 * The agent: the first call asks for the `lookup` tool; once a tool result is in the prompt,
 * the answer.
 */
import type { LanguageModelV4CallOptions, LanguageModelV4GenerateResult } from '@ai-sdk/provider';

const usage = (input: number, output: number): LanguageModelV4GenerateResult['usage'] => ({
  inputTokens: { total: input, noCache: input, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: output, text: output, reasoning: 0 },
});

export async function peerAgentGenerate(
  options: LanguageModelV4CallOptions,
): Promise<LanguageModelV4GenerateResult> {
  const answered = options.prompt.some((message) => message.role === 'tool');
  if (answered) {
    return {
      content: [{ type: 'text', text: 'The answer is 42.' }],
      finishReason: { unified: 'stop', raw: 'stop' },
      usage: usage(30, 6),
      warnings: [],
    };
  }
  return {
    content: [
      {
        type: 'tool-call',
        toolCallId: 'call_1',
        toolName: 'lookup',
        input: JSON.stringify({ query: 'answer' }),
      },
    ],
    finishReason: { unified: 'tool-calls', raw: 'tool_calls' },
    usage: usage(20, 5),
    warnings: [],
  };
}

/** What the `lookup` tool returns, on both sides. */
export function lookup(query: string): { found: string } {
  return { found: `${query}: 42` };
}
