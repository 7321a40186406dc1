/**
 * A guide's TypeScript code blocks, checked against the examples they come from: each block
 * must be a verbatim piece of one of the example files (which tsc type-checks and the guide's
 * test runs), the examples' imports from the checkout's `src/` read as the package's entry points.
 */
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';

const root = resolve(import.meta.dirname, '../..');

/** A checkout's source path (`'../src/store/index.js'`) as the package's entry point (`'turnkit/store'`). */
const asPackage = (text: string) =>
  text.replace(/'(?:\.\.\/)+src\/(index|worker|store\/index|console|ui)\.js'/g, (_, file: string) =>
    file === 'index' ? "'turnkit'" : `'turnkit/${file.replace('/index', '')}'`,
  );

/** Indentation aside: a formatter re-indents a block cut from inside a function. */
const flat = (text: string) => text.replace(/^[ \t]+/gm, '');

/** The fenced blocks of a markdown file in the given languages. */
export function codeBlocks(markdownPath: string, languages: readonly string[] = ['ts', 'tsx']): string[] {
  const text = readFileSync(resolve(root, markdownPath), 'utf8');
  const blocks: string[] = [];
  for (const match of text.matchAll(/^```(\w+)\n([\s\S]*?)^```$/gm))
    if (languages.includes(match[1]!)) blocks.push(match[2]!.replace(/\n$/, ''));
  return blocks;
}

/** The blocks of `markdownPath` that are not a piece of any of `sources` (paths from the repo root). */
export function blocksNotFromSources(markdownPath: string, sources: readonly string[]): string[] {
  const texts = sources.map((source) => flat(asPackage(readFileSync(resolve(root, source), 'utf8'))));
  return codeBlocks(markdownPath).filter((block) => {
    const lines = flat(block).split('\n');
    // Imports may sit in another order, or in another example file of the guide: line by line.
    if (lines.every((line) => line.startsWith('import ')))
      return !lines.every((line) => texts.some((text) => text.includes(line)));
    return !texts.some((text) => text.includes(lines.join('\n')));
  });
}
