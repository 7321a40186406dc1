/**
 * How a reader walks the engine from one function (issue 46 #4): each function's body in
 * source order, entering a callee the first time it is called (a function already read is not
 * read again), and back to the caller after. Prints the files read, how often the walk comes
 * back to a file it had already left (into a callee declared there, or back to the caller),
 * and which files it re-enters most.
 *
 *   npx tsx scripts/reading-order.ts [src dir] [file:function ...]
 *
 * Defaults: this checkout's src, and `activities/turn-activities.ts:createTurnActivities` and
 * `engine/tools/tool-call.ts:runToolCall`. Only calls that resolve to a function declared in the
 * src dir are followed (an interface's method is not: which implementation runs is not known).
 */
import { dirname, relative, resolve } from 'node:path';
import ts from 'typescript';

const srcDir = resolve(process.argv[2] ?? 'src');
const starts = process.argv.slice(3).length
  ? process.argv.slice(3)
  : ['activities/turn-activities.ts:createTurnActivities', 'engine/tools/tool-call.ts:runToolCall'];

const configPath = ts.findConfigFile(dirname(srcDir), ts.sys.fileExists, 'tsconfig.json')!;
const parsed = ts.parseJsonConfigFileContent(
  ts.readConfigFile(configPath, ts.sys.readFile).config,
  ts.sys,
  dirname(configPath),
);
const program = ts.createProgram(parsed.fileNames, parsed.options);
const checker = program.getTypeChecker();

type Body = ts.FunctionLikeDeclaration;

/** The function-like declaration a call resolves to, if it is one of src's own. */
function calleeOf(call: ts.CallExpression | ts.NewExpression): Body | undefined {
  let symbol = checker.getSymbolAtLocation(ts.isCallExpression(call) ? call.expression : call.expression);
  if (ts.isPropertyAccessExpression(call.expression))
    symbol = checker.getSymbolAtLocation(call.expression.name) ?? symbol;
  if (symbol && symbol.flags & ts.SymbolFlags.Alias) symbol = checker.getAliasedSymbol(symbol);
  for (const declaration of symbol?.declarations ?? []) {
    if (!declaration.getSourceFile().fileName.startsWith(srcDir)) continue;
    if (ts.isFunctionLike(declaration) && (declaration as Body).body) return declaration as Body;
    if (ts.isVariableDeclaration(declaration) && declaration.initializer) {
      const init = declaration.initializer;
      if (ts.isArrowFunction(init) || ts.isFunctionExpression(init)) return init;
    }
    if (ts.isClassDeclaration(declaration)) {
      const ctor = declaration.members.find(ts.isConstructorDeclaration);
      if (ctor?.body) return ctor;
    }
  }
  return undefined;
}

function walk(start: Body) {
  const read = new Set<Body>();
  /** Each move to another file: into a callee, or back to its caller. */
  const moves: { file: string; into: boolean }[] = [];
  const at = (node: ts.Node, into: boolean) => {
    const file = relative(srcDir, node.getSourceFile().fileName);
    if (moves.at(-1)?.file !== file) moves.push({ file, into });
  };
  const visit = (fn: Body) => {
    read.add(fn);
    at(fn, true);
    const scan = (node: ts.Node): void => {
      if (ts.isCallExpression(node) || ts.isNewExpression(node)) {
        const callee = calleeOf(node);
        if (callee && !read.has(callee)) {
          visit(callee);
          at(fn, false);
        }
      }
      ts.forEachChild(node, scan);
    };
    if (fn.body) scan(fn.body);
  };
  visit(start);
  const seen = new Set<string>();
  const reentries = new Map<string, number>();
  let returns = 0;
  let intoCallees = 0;
  for (const { file, into } of moves) {
    if (seen.has(file)) {
      returns += 1;
      if (into) intoCallees += 1;
      reentries.set(file, (reentries.get(file) ?? 0) + 1);
    }
    seen.add(file);
  }
  return { functions: read.size, files: seen.size, returns, intoCallees, reentries };
}

function find(spec: string): Body {
  const [file, name] = spec.split(':');
  const source = program.getSourceFile(resolve(srcDir, file!));
  let found: Body | undefined;
  const scan = (node: ts.Node): void => {
    if (ts.isFunctionDeclaration(node) && node.name?.text === name) found = node;
    ts.forEachChild(node, scan);
  };
  if (source) scan(source);
  if (!found) throw new Error(`no function ${name} in ${file}`);
  return found;
}

for (const spec of starts) {
  const { functions, files, returns, intoCallees, reentries } = walk(find(spec));
  const most = [...reentries].sort((a, b) => b[1] - a[1]).slice(0, 8);
  console.log(
    `${spec}: ${functions} functions in ${files} files, ${returns} returns to a file already left (${intoCallees} of them into a callee, the others back to a caller)`,
  );
  console.log(`  most re-entered: ${most.map(([file, n]) => `${file} ${n}`).join(', ')}`);
}
