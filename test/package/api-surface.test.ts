/**
 * The public API is what package.json "exports" reaches: every value and type each entry point
 * exports, compared with the committed api-surface.json. A change there is deliberate
 * (`npx vitest run test/package/api-surface.test.ts -u`) and belongs in docs/upgrading.md.
 */
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const root = resolve(import.meta.dirname, '../..');
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as {
  name: string;
  exports: Record<string, string | { default: string }>;
};

/** Each code entry point as an app imports it (`turnkit/store`) and its source file. */
function entryPoints(): [string, string][] {
  return Object.entries(pkg.exports).flatMap(([subpath, target]) => {
    if (typeof target === 'string') return [];
    const source = target.default.replace(/^\.\/dist\//, 'src/').replace(/\.js$/, '.ts');
    return [[join(pkg.name, subpath), join(root, source)]];
  });
}

/** The names an entry point exports that are types only (interfaces, type aliases). */
function typeNames(program: ts.Program, file: string): string[] {
  const checker = program.getTypeChecker();
  const module = checker.getSymbolAtLocation(program.getSourceFile(file)!)!;
  return checker
    .getExportsOfModule(module)
    .filter((symbol) => {
      const target = symbol.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(symbol) : symbol;
      return (target.flags & ts.SymbolFlags.Value) === 0;
    })
    .map((symbol) => symbol.name)
    .sort();
}

describe('the public API', () => {
  it('every entry point exports exactly the values and types of api-surface.json', async () => {
    const entries = entryPoints();
    const program = ts.createProgram(
      entries.map(([, file]) => file),
      {
        module: ts.ModuleKind.NodeNext,
        moduleResolution: ts.ModuleResolutionKind.NodeNext,
        skipLibCheck: true,
      },
    );
    const surface: Record<string, { values: string[]; types: string[] }> = {};
    for (const [name, file] of entries) {
      const values = Object.keys((await import(pathToFileURL(file).href)) as object).sort();
      surface[name] = { values, types: typeNames(program, file) };
    }
    expect(Object.keys(surface)).toEqual([
      'turnkit',
      'turnkit/worker',
      'turnkit/workflow',
      'turnkit/store',
      'turnkit/testing',
      'turnkit/ui',
      'turnkit/console',
      'turnkit/protocols',
    ]);
    await expect(`${JSON.stringify(surface, null, 2)}\n`).toMatchFileSnapshot('./api-surface.json');
    // The type checker reads the sources and every dependency's declarations: slow on 2 cores.
  }, 300_000);
});
