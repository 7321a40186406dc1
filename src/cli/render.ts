/**
 * What the `turnkit` command prints: plain text a person reads (colour only on a TTY), or
 * JSON for scripts. Everything here is read from the store; nothing calls a model.
 * Model text, tool output and error messages are untrusted: every piece of them passes
 * `terminalSafe` before it is composed into a line, and every line leaves through `write`,
 * which lets only the renderer's own colour and line-redraw codes through (an eslint rule keeps
 * the CLI's other files from writing to a stream themselves).
 */
import { limitsFromJson, DEFAULT_LIMITS } from '../agents/agent.js';
import { phaseOf, iterationsOf } from '../engine/step/turn-state.js';
import type { ContentPart, MessageRecord, Store, ToolExecutionRecord, TurnRecord } from '../store/types.js';
import { TERMINAL_TURN_STATUSES } from '../store/types.js';
import { turnWorkflowId } from '../workflows/contract.js';

/** Exit codes of `run --follow`, `watch` and `show`: the turn's status, so scripts can branch. */
export const EXIT_CODES = {
  completed: 0,
  error: 1,
  usage: 2,
  failed: 3,
  cancelled: 4,
  unfinished: 5,
  /** `turnkit eval` found a regression. */
  regression: 6,
} as const;

export function exitCodeFor(status: TurnRecord['status']): number {
  if (status === 'completed') return EXIT_CODES.completed;
  if (status === 'failed') return EXIT_CODES.failed;
  if (status === 'cancelled') return EXIT_CODES.cancelled;
  return EXIT_CODES.unfinished;
}

export const isTerminal = (turn: TurnRecord) => TERMINAL_TURN_STATUSES.includes(turn.status);

export interface Style {
  bold(text: string): string;
  dim(text: string): string;
  status(status: string): string;
}

const PLAIN: Style = { bold: (t) => t, dim: (t) => t, status: (t) => t };
const COLOURS: Record<string, number> = {
  completed: 32,
  failed: 31,
  cancelled: 33,
  running: 36,
  waiting: 35,
};
const ANSI: Style = {
  bold: (t) => `\u001b[1m${t}\u001b[22m`,
  dim: (t) => `\u001b[2m${t}\u001b[22m`,
  status: (t) => (COLOURS[t] ? `\u001b[${COLOURS[t]}m${t}\u001b[39m` : t),
};

/** Colour only for a terminal, and never when NO_COLOR is set. */
export function styleFor(stream: NodeJS.WriteStream): Style {
  return stream.isTTY && !process.env['NO_COLOR'] ? ANSI : PLAIN;
}

/* eslint-disable no-control-regex -- matching control characters is the point here */
/** Escape sequences: CSI, OSC (hyperlinks, clipboard, titles), DCS/SOS/PM/APC strings, two-byte ESC forms. */
const ESCAPE_SEQUENCES =
  /\u001b\[[0-?]*[ -/]*[@-~]|\u001b\][^\u0007\u001b\u009c\n]*(?:\u0007|\u001b\\|\u009c)?|\u001b[PX^_][^\u001b\u009c\n]*(?:\u001b\\|\u009c)?|\u001b[ -~]?|\u009b[0-?]*[ -/]*[@-~]|[\u009d\u0090\u0098\u009e\u009f][^\u0007\u001b\u009c\n]*(?:\u0007|\u009c)?/g;
/** What is left that a terminal acts on: C0 but tab and newline, DEL, C1, bidi overrides and isolates. */
const CONTROLS = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/g;
/** The renderer's own codes (colours, erase line, cursor up, carriage return) first, captured; then anything else. */
const ANY_CODE = new RegExp(
  `(\u001b\\[[0-9;]*m|\u001b\\[2K|\u001b\\[1A|\r)|${ESCAPE_SEQUENCES.source}|${CONTROLS.source}`,
  'g',
);
/* eslint-enable no-control-regex */

/** Untrusted text as a terminal shows it without acting on it: escape sequences and controls removed. */
export function terminalSafe(text: string): string {
  return String(text).replace(ESCAPE_SEQUENCES, '').replace(CONTROLS, '');
}

/** JSON for a terminal or a pipe: the same value, with C1, bidi and line-separator characters escaped. */
export function jsonText(value: unknown): string {
  return JSON.stringify(value).replace(
    /[\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g,
    (char) => `\\u${char.charCodeAt(0).toString(16).padStart(4, '0')}`,
  );
}

/**
 * The CLI's only way out to a stream. Lines are composed from `terminalSafe` pieces; this keeps
 * the renderer's own codes and drops any other escape or control a new output path might let in.
 */
export function write(stream: NodeJS.WritableStream, text: string): void {
  stream.write(text.replace(ANY_CODE, (code, own: string | undefined) => own ?? ''));
}

export function head(text: string, max = 120): string {
  const flat = terminalSafe(text).replace(/\s+/g, ' ').trim();
  return flat.length > max ? `${flat.slice(0, max - 1)}…` : flat;
}

export function formatCost(cost: number): string {
  return `$${cost.toFixed(cost >= 1 ? 2 : 4)}`;
}

function formatElapsed(ms: number): string {
  const seconds = Math.max(ms, 0) / 1000;
  if (seconds < 60) return `${seconds.toFixed(1)}s`;
  return `${Math.floor(seconds / 60)}m${String(Math.floor(seconds % 60)).padStart(2, '0')}s`;
}

export function turnLink(ui: string, namespace: string, turnId: string): string {
  return `${ui}/namespaces/${encodeURIComponent(namespace)}/workflows/${encodeURIComponent(turnWorkflowId(turnId))}`;
}

/** The turn's progress right now, as `watch` shows it and `--json` returns it. */
export interface Progress {
  turnId: string;
  agent: string;
  status: TurnRecord['status'];
  phase: string;
  iteration: number;
  maxIterations: number;
  runningTools: string[];
  /** Tools of this turn whose calls await a person's approval. */
  awaitingApproval: string[];
  tokens: number;
  cost: number;
  elapsedMs: number;
}

export async function progressOf(store: Store, turn: TurnRecord, now = Date.now()): Promise<Progress> {
  const limits = limitsFromJson(turn.options['budget_limits'], DEFAULT_LIMITS);
  const executions = await store.listToolExecutions({ turnId: turn.id });
  const started = Date.parse(turn.startedAt ?? turn.submittedAt ?? turn.createdAt);
  const ended = turn.completedAt ? Date.parse(turn.completedAt) : now;
  return {
    turnId: turn.id,
    agent: turn.agentName,
    status: turn.status,
    phase: isTerminal(turn) ? 'done' : turn.status === 'running' ? phaseOf(turn) : turn.status,
    iteration: iterationsOf(turn),
    maxIterations: limits.maxIterations,
    runningTools: executions.filter((e) => e.status === 'running').map((e) => e.toolName),
    awaitingApproval: executions.filter((e) => e.status === 'awaiting_approval').map((e) => e.toolName),
    tokens: turn.usage?.total_tokens ?? 0,
    cost: turn.cost,
    elapsedMs: ended - started,
  };
}

/** One line of `watch`: `running · tools lookup · iteration 2/10 · 340 tokens · $0.0012 · 3.2s`. */
export function progressLine(progress: Progress, style: Style, spinner = '', cli = 'turnkit'): string {
  const parts = [style.status(progress.status)];
  if (progress.status === 'waiting') parts.push(waitingFor(progress, cli));
  if (progress.status === 'running') {
    parts.push(
      progress.runningTools.length > 0
        ? `${spinner ? `${spinner} ` : ''}tool ${progress.runningTools.map(terminalSafe).join(', ')}`
        : `${spinner ? `${spinner} ` : ''}${progress.phase}`,
    );
  }
  parts.push(
    `iteration ${progress.iteration}/${progress.maxIterations}`,
    `${progress.tokens} tokens`,
    formatCost(progress.cost),
    formatElapsed(progress.elapsedMs),
  );
  return `${style.bold(terminalSafe(progress.agent))} ${progress.turnId} · ${parts.join(' · ')}`;
}

/** What a waiting turn waits for: a person's approval, or its sub-agents (whose calls may await one). */
function waitingFor(progress: Progress, cli: string): string {
  const names = (tools: string[]) => [...new Set(tools)].map(terminalSafe).join(', ');
  if (progress.awaitingApproval.length > 0)
    return `for approval of ${names(progress.awaitingApproval)} (${cli} pending ${progress.turnId})`;
  if (progress.runningTools.length > 0)
    return `for ${names(progress.runningTools)} (calls awaiting approval: ${cli} pending ${progress.turnId})`;
  return `(calls awaiting approval: ${cli} pending ${progress.turnId})`;
}

export function partText(part: ContentPart): string {
  switch (part.type) {
    case 'text':
      return part.text;
    case 'thinking':
      return `(thinking) ${part.redacted ? '[redacted]' : part.text}`;
    case 'tool_call':
      return `→ ${part.name}(${JSON.stringify(part.arguments)})`;
    case 'tool_result':
      return `← ${part.error ? 'error: ' : ''}${part.text}`;
    case 'image':
      return `[image ${part.mime_type}${part.url ? ` ${part.url}` : ''}]`;
    case 'file':
      return `[file ${part.mime_type}${part.filename ? ` ${part.filename}` : ''}]`;
    case 'media_analysis':
      return `[media analysis] ${part.text}`;
    case 'provider':
      return `[${part.kind}]`;
  }
}

export function messageLines(messages: readonly MessageRecord[]): string[] {
  return messages.map(
    (message) =>
      `  #${message.sequence} ${message.role}: ${head(message.content.map(partText).join(' '), 200)}`,
  );
}

export function executionLines(executions: readonly ToolExecutionRecord[]): string[] {
  return executions.map((execution) => {
    // An execution with no outcome yet (running, awaiting approval) shows none.
    const outcome = execution.error
      ? `error: ${execution.error.message}`
      : execution.result == null
        ? ''
        : JSON.stringify(execution.result);
    const status = execution.status === 'awaiting_approval' ? 'awaiting approval' : execution.status;
    return `  ${terminalSafe(execution.toolName)} ${status}${outcome ? ` ${head(outcome, 100)}` : ''}`;
  });
}

export function treeLines(turns: readonly TurnRecord[], rootId: string, style: Style): string[] {
  const children = new Map<string | null, TurnRecord[]>();
  for (const turn of turns) {
    const key = turn.id === rootId ? null : turn.parentTurnId;
    children.set(key, [...(children.get(key) ?? []), turn]);
  }
  const lines: string[] = [];
  const walk = (parent: string | null, depth: number) => {
    for (const turn of children.get(parent) ?? []) {
      lines.push(
        `  ${'  '.repeat(depth)}${terminalSafe(turn.agentName)} ${turn.id} ${style.status(turn.status)}`,
      );
      walk(turn.id, depth + 1);
    }
  };
  walk(null, 0);
  return lines;
}
