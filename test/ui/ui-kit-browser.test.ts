/**
 * Issue 32, part 2: `turnkit/ui` is what a browser imports. Its import graph has no Node
 * built-in (esbuild bundles it for the browser), and its declarations compile in a consumer
 * with `skipLibCheck: false` and no Node types.
 */
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { build } from 'esbuild';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';
import type { TurnKitUIMessage } from '../../src/ui.js';
import {
  formatCost,
  isReasoningPart,
  isRunFinished,
  isStepStartPart,
  isToolPart,
  subAgentOfTool,
  toolNameOf,
  userTextOf,
} from '../../src/ui.js';

const root = resolve(import.meta.dirname, '../..');
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as {
  exports: Record<string, { types: string; default: string }>;
};

/** `turnkit/ui`'s source file, from package.json "exports". */
const entry = join(root, pkg.exports['./ui']!.default.replace(/^\.\/dist\//, 'src/').replace(/\.js$/, '.ts'));

const diagnostics = (list: readonly ts.Diagnostic[]) =>
  list.map((d) => ts.flattenDiagnosticMessageText(d.messageText, '\n'));

describe('turnkit/ui in a browser', () => {
  it('ui kit: the browser bundle of turnkit/ui has no Node built-in, and only its own files in it', async () => {
    const result = await build({
      entryPoints: [entry],
      bundle: true,
      platform: 'browser',
      format: 'esm',
      write: false,
      metafile: true,
      logLevel: 'silent',
    });
    expect(result.errors).toEqual([]);
    const code = result.outputFiles[0]!.text;
    expect(code).not.toMatch(/node:|require\(|from ["'](fs|path|crypto|http|net|os)["']/);
    // Type-only imports (the AI SDK's types, the store's) leave nothing behind.
    const inputs = Object.keys(result.metafile.inputs).sort();
    expect(inputs).toEqual(['src/contract/turn-statuses.ts', 'src/ui.ts', 'src/ui/parts.ts']);
    for (const name of ['isToolPart', 'runCostOf', 'userTextOf', 'subAgentsOf']) expect(code).toContain(name);
  });

  it("ui kit: its declarations compile in a consumer with skipLibCheck false; without Node's types, TurnKit's own still check clean", () => {
    const out = join(root, 'node_modules/.cache', `ui-kit-dts-${process.pid}`);
    rmSync(out, { recursive: true, force: true });
    try {
      const emit = ts.createProgram([entry], {
        module: ts.ModuleKind.NodeNext,
        moduleResolution: ts.ModuleResolutionKind.NodeNext,
        target: ts.ScriptTarget.ES2022,
        strict: true,
        declaration: true,
        emitDeclarationOnly: true,
        rootDir: join(root, 'src'),
        outDir: out,
        types: [],
        skipLibCheck: true,
      });
      const emitted = emit.emit();
      expect(diagnostics(emitted.diagnostics)).toEqual([]);
      mkdirSync(join(out, 'app'), { recursive: true });
      const consumer = join(out, 'app/consumer.ts');
      writeFileSync(
        consumer,
        [
          "import type { TurnKitUIMessage, TurnKitMessageMetadata, SubAgentUIData } from 'turnkit/ui';",
          "import { isRunCancelled, runCostOf, subAgentsOf } from 'turnkit/ui';",
          'export function show(message: TurnKitUIMessage): string {',
          '  const meta: TurnKitMessageMetadata | undefined = message.metadata;',
          '  const agents: SubAgentUIData[] = subAgentsOf(message);',
          '  return `${meta?.status} ${isRunCancelled(message)} ${runCostOf(message) ?? 0} ${agents.length}`;',
          '}',
          '',
        ].join('\n'),
      );
      const program = (types: string[]) =>
        ts.createProgram([consumer], {
          module: ts.ModuleKind.ESNext,
          moduleResolution: ts.ModuleResolutionKind.Bundler,
          target: ts.ScriptTarget.ES2022,
          lib: ['lib.es2023.d.ts', 'lib.dom.d.ts'],
          strict: true,
          noEmit: true,
          skipLibCheck: false,
          types,
          baseUrl: out,
          paths: { 'turnkit/ui': [join(out, 'ui.d.ts')] },
        });
      // No Node types: TurnKit's declarations and the consumer still check clean (the AI SDK's
      // own declarations name Node's \`http\` and \`Buffer\`: they need Node's types, or skipLibCheck).
      const browserOnly = program([]);
      const ours = browserOnly.getSourceFiles().filter((file) => file.fileName.startsWith(out));
      expect(ours.map((file) => file.fileName)).toContain(join(out, 'ui/types.d.ts'));
      for (const file of ours)
        expect(diagnostics(ts.getPreEmitDiagnostics(browserOnly, file)), file.fileName).toEqual([]);
      // With Node's types (as a Vite or Next app has them) everything compiles.
      const check = program(['node']);
      expect(diagnostics(ts.getPreEmitDiagnostics(check))).toEqual([]);
      // The check read the built declarations, not the sources.
      const files = check.getSourceFiles().map((file) => file.fileName);
      expect(files).toContain(join(out, 'ui.d.ts'));
      expect(files.some((file) => file.startsWith(join(root, 'src')))).toBe(false);
    } finally {
      rmSync(out, { recursive: true, force: true });
    }
  }, 120_000);
});

describe('turnkit/ui helpers', () => {
  it('ui kit: the guards read dynamic-tool and tool-<name> parts alike; sub-agents by tool call; costs and ends', () => {
    const message = {
      id: 'turn_1',
      role: 'assistant',
      metadata: { turnId: 'turn_1', status: 'cancelled' },
      parts: [
        { type: 'step-start' },
        { type: 'reasoning', text: 'hm' },
        { type: 'dynamic-tool', toolName: 'lookup', toolCallId: 'c1', state: 'input-available', input: {} },
        { type: 'tool-weather', toolCallId: 'c2', state: 'input-available', input: {} },
        {
          type: 'data-subagent',
          id: 'turn_2',
          data: {
            turnId: 'turn_2',
            agentName: 'r',
            parentTurnId: 'turn_1',
            toolCallId: 'c1',
            status: 'completed',
            parts: [],
          },
        },
      ],
    } as unknown as TurnKitUIMessage;
    const tools = message.parts.filter(isToolPart);
    expect(tools.map(toolNameOf)).toEqual(['lookup', 'weather']);
    expect(message.parts.filter(isStepStartPart)).toHaveLength(1);
    expect(message.parts.filter(isReasoningPart)).toHaveLength(1);
    expect(subAgentOfTool(message, 'c1')?.turnId).toBe('turn_2');
    expect(subAgentOfTool(message, 'c2')).toBeUndefined();
    expect(isRunFinished(message)).toBe(true);
    expect(isRunFinished({ metadata: { turnId: 't', status: 'running' } })).toBe(false);
    expect(isRunFinished({ metadata: { turnId: 't', status: 'stale' } })).toBe(false);
    expect([formatCost(0.004213), formatCost(1.2749)]).toEqual(['$0.0042', '$1.27']);
  });

  it("ui kit: userTextOf gives a stored task message's own text, also for rows written before task_text", () => {
    const row = (text: string, metadata: Record<string, unknown>) => ({
      role: 'user',
      content: [{ type: 'text', text }],
      metadata,
    });
    expect(userTextOf(row('Task:\nHi', { task: true, task_text: 'Hi' }))).toBe('Hi');
    expect(userTextOf(row('Task:\nSum it\n\nInput:\n{\n  "a": 1\n}', { task: true }))).toBe('Sum it');
    expect(userTextOf(row('Task:\nplain', {}))).toBe('Task:\nplain');
    expect(userTextOf(row('hello', { source: 'post' }))).toBe('hello');
  });
});
