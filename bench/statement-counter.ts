/**
 * Counts the statements the store sends to its database, below the store: better-sqlite3's
 * statement runs and `exec` (BEGIN IMMEDIATE, COMMIT, ROLLBACK), and pg's client queries. The
 * store's code and API stay as they are; only this benchmark process's drivers are wrapped.
 *
 * Each statement is charged to the label of the async call chain that sent it (`countAs`):
 * an activity's name in the worker, `client` for the client's calls. Statements sent outside
 * any label are charged to `other` while counting is on, and ignored while it is off.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import Database from 'better-sqlite3';
import pg from 'pg';

export interface Statement {
  label: string;
  sql: string;
  /** For a read of one turn row by id (`SELECT … FROM turnkit_turns WHERE id = ?`): that id. */
  turnRowId: string | null;
  /** The values it was sent with (to explain its plan again). */
  params: readonly unknown[];
}

const label = new AsyncLocalStorage<string>();
let counting = false;
let log: Statement[] = [];

/** Runs `fn` with every statement it sends charged to `name`. */
export function countAs<T>(name: string, fn: () => Promise<T>): Promise<T> {
  return label.run(name, fn);
}

/** Starts a fresh log; statements are recorded until `stopCounting`. */
export function startCounting(): void {
  log = [];
  counting = true;
}

/** Stops recording and returns what was sent since `startCounting`. */
export function stopCounting(): Statement[] {
  counting = false;
  return log;
}

const TURN_ROW_READ =
  /^\s*SELECT\b.*\bFROM turnkit_turns (WHERE id|t LEFT JOIN turnkit_waits w ON w\.turn_id = t\.id WHERE t\.id) = (\?|\$1)(?!\d)/is;
/** The same read sent last in a simple query with BEGIN and the locks, its id a literal (decision 88). */
const TURN_ROW_READ_LAST = /;\s*SELECT\b[^;]*\bFROM turnkit_turns WHERE id = \$(tk\d*)\$(.*?)\$\1\$\s*$/is;

function record(sql: string, params: readonly unknown[] | undefined): void {
  if (!counting) return;
  const text = sql.replace(/\s+/g, ' ').trim();
  const id =
    TURN_ROW_READ.test(text) && typeof params?.[0] === 'string'
      ? params[0]
      : (TURN_ROW_READ_LAST.exec(text)?.[2] ?? null);
  log.push({ label: label.getStore() ?? 'other', sql: text, turnRowId: id, params: params ?? [] });
}

type Method = (this: unknown, ...args: unknown[]) => unknown;

function wrap(target: object, name: string, before: (self: unknown, args: unknown[]) => void): void {
  const original = Reflect.get(target, name) as Method;
  Reflect.set(target, name, function (this: unknown, ...args: unknown[]) {
    before(this, args);
    return original.apply(this, args);
  });
}

/** Wraps both drivers once; call before the stores open. */
export function installStatementCounter(): void {
  // better-sqlite3's Statement class is not exported: reach its prototype through one statement.
  const probe = new Database(':memory:');
  const statementPrototype = Object.getPrototypeOf(probe.prepare('SELECT 1')) as object;
  probe.close();
  for (const name of ['run', 'get', 'all', 'iterate']) {
    wrap(statementPrototype, name, (self, args) =>
      record((self as { source: string }).source, args as unknown[]),
    );
  }
  wrap(Database.prototype, 'exec', (_self, args) => record(String(args[0]), []));

  // A pooled query is counted where the pool takes it, in its caller's chain: the client
  // it is handed may run it from another chain (the one that released that client). The
  // store sends every pooled statement as a config object; a plain string (only the schema's
  // creation, at open) is left to the client.
  const pooled = new WeakSet<object>();
  wrap(pg.Pool.prototype, 'query', (_self, args) => {
    const [first] = args;
    if (typeof first !== 'object' || first === null) return;
    pooled.add(first);
    recordPg(first, args[1]);
  });
  wrap(pg.Client.prototype, 'query', (_self, args) => {
    const [first] = args;
    if (typeof first === 'object' && first !== null && pooled.has(first)) return;
    recordPg(first, args[1]);
  });
}

function recordPg(first: unknown, values: unknown): void {
  if (typeof first === 'string') {
    record(first, Array.isArray(values) ? values : []);
    return;
  }
  const config = first as { text?: unknown; values?: unknown[] } | null;
  if (config && typeof config.text === 'string') record(config.text, config.values ?? []);
}
