/**
 * The engine's reading order, checked from its import lines (issue 46 #4): the engine's folders
 * import each other in no cycle, and the modules that decide what a call
 * comes to import nothing that writes.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const ENGINE = resolve(import.meta.dirname, '../../src/engine');

/** Every relative import of `file` (type-only ones too: a reader follows them as well). */
function importsOf(file: string): string[] {
  const { importedFiles } = ts.preProcessFile(readFileSync(file, 'utf8'), true, false);
  return importedFiles
    .map((imported) => imported.fileName)
    .filter((name) => name.startsWith('.'))
    .map((name) => resolve(dirname(file), name.replace(/\.js$/, '.ts')));
}

/** The engine's folders and which others each imports; files at the engine's root (the runtime) are left out. */
function folderGraph(): Map<string, Set<string>> {
  const graph = new Map<string, Set<string>>();
  const files = readdirSync(ENGINE, { recursive: true, encoding: 'utf8' }).filter((f) => f.endsWith('.ts'));
  for (const file of files) {
    const from = dirname(file);
    if (from === '.') continue;
    const edges = graph.get(from) ?? new Set<string>();
    graph.set(from, edges);
    for (const target of importsOf(join(ENGINE, file))) {
      const to = dirname(relative(ENGINE, target));
      if (to !== from && to !== '.' && !to.startsWith('..')) edges.add(to);
    }
  }
  return graph;
}

/** The cycles of `graph` restricted to `nodes`, each as the path that closes it. */
function cyclesAmong(graph: Map<string, Set<string>>, nodes: readonly string[]): string[][] {
  const cycles: string[][] = [];
  const walk = (path: string[]) => {
    for (const next of graph.get(path.at(-1)!) ?? []) {
      if (!nodes.includes(next)) continue;
      if (next === path[0]) cycles.push([...path, next]);
      else if (!path.includes(next)) walk([...path, next]);
    }
  };
  for (const node of nodes) walk([node]);
  return cycles;
}

describe('architecture: the engine imports in one direction', () => {
  it('finds a cycle when there is one (the check can fail)', () => {
    const graph = new Map([
      ['tools', new Set(['model'])],
      ['model', new Set(['claim'])],
      ['claim', new Set(['tools'])],
    ]);
    expect(cyclesAmong(graph, ['tools', 'claim', 'model'])).toContainEqual([
      'tools',
      'model',
      'claim',
      'tools',
    ]);
  });

  it('issue 46: tools/, claim/ and model/ import each other in no cycle', () => {
    const graph = folderGraph();
    expect(graph.get('tools')?.size).toBeGreaterThan(0);
    expect(cyclesAmong(graph, ['tools', 'claim', 'model'])).toEqual([]);
  });

  it('issue 46: no two of the engine folders import each other, through any others (tools → lane → end → step, …)', () => {
    const graph = folderGraph();
    expect(graph.size).toBeGreaterThanOrEqual(10);
    expect(cyclesAmong(graph, [...graph.keys()])).toEqual([]);
  });

  it('issue 46: step/ imports none of tools/, claim/ and model/', () => {
    expect(
      [...(folderGraph().get('step') ?? [])].filter((to) => ['tools', 'claim', 'model'].includes(to)),
    ).toEqual([]);
  });
});

/** The modules that decide what a call comes to (decision 85). */
const DECISIONS = ['approval', 'tool-policy', 'budget-completion', 'tool-replay', 'tool-failure', 'verdict'];

/**
 * What a decision may not import: the store (its record types and pure builders aside), the
 * execution writer, the step's writes, the pipeline and the effects it runs.
 */
function writerImports(file: string): string[] {
  const { importedFiles } = ts.preProcessFile(readFileSync(file, 'utf8'), true, false);
  const source = readFileSync(file, 'utf8');
  const names = importedFiles.map((imported) => imported.fileName);
  const writers = names.filter(
    (name) =>
      (/\/store\//.test(name) && !/\/store\/(types|records)\.js$/.test(name)) ||
      /(^|\/)(tool-execution|tool-call|tool-results|execution-lookup|engine-run-call|coordination|delegation|run-tool|tools-phase)\.js$/.test(
        name,
      ) ||
      /\/step\/(turn-step|charge|store-outage|fence)\.js$/.test(name),
  );
  // The store's interface itself, even as a type: a decision is handed what it reads.
  const storeType = /import type \{[^}]*\bStore\b[^}]*\}/.test(source) ? ['the Store type'] : [];
  return [...writers, ...storeType];
}

describe("architecture: a tool call's decisions write nothing", () => {
  it('finds a writer when one is imported (the check can fail)', () => {
    const execution = join(ENGINE, 'tools', 'tool-execution.ts');
    expect(writerImports(execution).length).toBeGreaterThan(0);
  });

  it.each(DECISIONS)('issue 46: tools/%s.ts imports no store and no execution writer', (name) => {
    expect(writerImports(join(ENGINE, 'tools', `${name}.ts`))).toEqual([]);
  });
});
