/**
 * The budget ledger (decision 59): one row per turn tree, `turnkit_budget_ledger`, holding the
 * counters a budget check needs (spec §10): iterations and cost summed over the tree's turns,
 * and its tool executions, in total and by tool name, leaving out cancelled ones and those the
 * budget itself denied (`error.details.budget_denied`). Database triggers keep it, in the
 * statement that changes a counted row, so it is right whatever process or implementation
 * writes the tables, and a check reads one row however long the tree has run.
 *
 * Counting rules, as in `Budget`: a turn's iterations are `options.state.iterations`, else the
 * legacy top-level `options.iterations`, when it is a number, else 0.
 */
import type { DialectTypes } from './schema.js';

export const BUDGET_LEDGER_TABLE = 'turnkit_budget_ledger';

type DialectName = 'sqlite' | 'postgres';

const ledgerTable = (t: DialectTypes): string =>
  `CREATE TABLE ${BUDGET_LEDGER_TABLE} (
        root_turn_id ${t.text} PRIMARY KEY,
        iterations ${t.int} NOT NULL DEFAULT 0,
        cost ${t.cost} NOT NULL DEFAULT 0,
        tool_executions ${t.int} NOT NULL DEFAULT 0,
        tool_executions_by_name ${t.json} NOT NULL)`;

/** SQLite: a turn row's iterations (`row` is NEW, OLD or a table alias). */
const sqliteIterations = (row: string): string =>
  `(CASE WHEN json_type(${row}.options, '$.state.iterations') IN ('integer', 'real')
      THEN json_extract(${row}.options, '$.state.iterations')
    WHEN json_type(${row}.options, '$.iterations') IN ('integer', 'real')
      THEN json_extract(${row}.options, '$.iterations')
    ELSE 0 END)`;

/** SQLite: whether a tool execution row counts against the budget. */
const sqliteCounted = (row: string): string =>
  `(${row}.status <> 'cancelled' AND COALESCE(json_type(${row}.error, '$.details.budget_denied'), '') <> 'true')`;

/** SQLite: the ledger's by-name map with `delta` added to `name`'s count (any name, quotes included). */
const sqliteAddToName = (name: string, delta: string): string =>
  `json_patch(tool_executions_by_name, json_object(${name},
      COALESCE((SELECT value FROM json_each(tool_executions_by_name) WHERE key = ${name}), 0) + ${delta}))`;

const sqliteRootOf = (row: string) => `(SELECT root_turn_id FROM turnkit_turns WHERE id = ${row}.turn_id)`;

function sqliteTriggers(): string[] {
  const counted = (row: string, delta: string) =>
    `UPDATE ${BUDGET_LEDGER_TABLE} SET tool_executions = tool_executions + ${delta},
        tool_executions_by_name = ${sqliteAddToName(`${row}.tool_name`, delta)}
      WHERE root_turn_id = ${sqliteRootOf(row)};`;
  return [
    `CREATE TRIGGER turnkit_budget_turn_insert AFTER INSERT ON turnkit_turns BEGIN
      INSERT INTO ${BUDGET_LEDGER_TABLE} (root_turn_id, iterations, cost, tool_executions_by_name)
        VALUES (NEW.root_turn_id, ${sqliteIterations('NEW')}, NEW.cost, '{}')
        ON CONFLICT (root_turn_id) DO UPDATE SET iterations = iterations + excluded.iterations,
          cost = cost + excluded.cost;
    END`,
    // (ledger - old) + new: a one-turn tree's ledger cost is exactly its turn's.
    `CREATE TRIGGER turnkit_budget_turn_update AFTER UPDATE OF options, cost ON turnkit_turns
      WHEN OLD.cost IS NOT NEW.cost OR ${sqliteIterations('OLD')} IS NOT ${sqliteIterations('NEW')} BEGIN
      UPDATE ${BUDGET_LEDGER_TABLE}
        SET iterations = iterations - ${sqliteIterations('OLD')} + ${sqliteIterations('NEW')},
          cost = cost - OLD.cost + NEW.cost
        WHERE root_turn_id = NEW.root_turn_id;
    END`,
    `CREATE TRIGGER turnkit_budget_turn_delete AFTER DELETE ON turnkit_turns
      WHEN OLD.id = OLD.root_turn_id BEGIN
      DELETE FROM ${BUDGET_LEDGER_TABLE} WHERE root_turn_id = OLD.id;
    END`,
    `CREATE TRIGGER turnkit_budget_execution_insert AFTER INSERT ON turnkit_tool_executions
      WHEN ${sqliteCounted('NEW')} BEGIN
      ${counted('NEW', '1')}
    END`,
    `CREATE TRIGGER turnkit_budget_execution_uncounted AFTER UPDATE OF status, error ON turnkit_tool_executions
      WHEN ${sqliteCounted('OLD')} AND NOT ${sqliteCounted('NEW')} BEGIN
      ${counted('OLD', '-1')}
    END`,
    `CREATE TRIGGER turnkit_budget_execution_counted AFTER UPDATE OF status, error ON turnkit_tool_executions
      WHEN NOT ${sqliteCounted('OLD')} AND ${sqliteCounted('NEW')} BEGIN
      ${counted('NEW', '1')}
    END`,
  ];
}

function sqliteBackfill(): string[] {
  return [
    `INSERT INTO ${BUDGET_LEDGER_TABLE} (root_turn_id, iterations, cost, tool_executions, tool_executions_by_name)
      SELECT t.root_turn_id, SUM(${sqliteIterations('t')}), SUM(t.cost), 0, '{}'
        FROM turnkit_turns t GROUP BY t.root_turn_id`,
    `UPDATE ${BUDGET_LEDGER_TABLE} SET
        tool_executions = (SELECT COUNT(*) FROM turnkit_tool_executions e
          JOIN turnkit_turns t ON t.id = e.turn_id
          WHERE t.root_turn_id = ${BUDGET_LEDGER_TABLE}.root_turn_id AND ${sqliteCounted('e')}),
        tool_executions_by_name = COALESCE((SELECT json_group_object(tool_name, n) FROM (
          SELECT e.tool_name AS tool_name, COUNT(*) AS n FROM turnkit_tool_executions e
            JOIN turnkit_turns t ON t.id = e.turn_id
            WHERE t.root_turn_id = ${BUDGET_LEDGER_TABLE}.root_turn_id AND ${sqliteCounted('e')}
            GROUP BY e.tool_name)), '{}')`,
  ];
}

/** PostgreSQL: the same rules as functions, used by the triggers and the backfill. */
function postgresFunctions(): string[] {
  return [
    `CREATE FUNCTION turnkit_turn_iterations(options jsonb) RETURNS integer
      LANGUAGE sql IMMUTABLE AS $$
        SELECT CASE WHEN jsonb_typeof(options #> '{state,iterations}') = 'number'
            THEN (options #>> '{state,iterations}')::numeric::integer
          WHEN jsonb_typeof(options -> 'iterations') = 'number'
            THEN (options ->> 'iterations')::numeric::integer
          ELSE 0 END $$`,
    `CREATE FUNCTION turnkit_execution_counted(status text, error jsonb) RETURNS boolean
      LANGUAGE sql IMMUTABLE AS $$
        SELECT status <> 'cancelled' AND (error #> '{details,budget_denied}') IS DISTINCT FROM 'true'::jsonb $$`,
    // The triggers run in whatever session writes: their functions find the tables by the
    // search path the migration ran with, not the writer's.
    `CREATE FUNCTION turnkit_budget_turn() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
      BEGIN
        IF TG_OP = 'INSERT' THEN
          INSERT INTO ${BUDGET_LEDGER_TABLE} AS l (root_turn_id, iterations, cost, tool_executions_by_name)
            VALUES (NEW.root_turn_id, turnkit_turn_iterations(NEW.options), NEW.cost, '{}')
            ON CONFLICT (root_turn_id) DO UPDATE SET iterations = l.iterations + excluded.iterations,
              cost = l.cost + excluded.cost;
        ELSIF TG_OP = 'UPDATE' THEN
          UPDATE ${BUDGET_LEDGER_TABLE} SET
              iterations = iterations - turnkit_turn_iterations(OLD.options) + turnkit_turn_iterations(NEW.options),
              cost = cost - OLD.cost + NEW.cost
            WHERE root_turn_id = NEW.root_turn_id;
        ELSIF OLD.id = OLD.root_turn_id THEN
          DELETE FROM ${BUDGET_LEDGER_TABLE} WHERE root_turn_id = OLD.id;
        END IF;
        RETURN NULL;
      END $$`,
    `CREATE FUNCTION turnkit_budget_execution() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
      DECLARE
        row_counted record;
        delta integer;
      BEGIN
        IF TG_OP = 'INSERT' THEN
          row_counted := NEW;
          delta := 1;
        ELSIF turnkit_execution_counted(NEW.status, NEW.error) THEN
          row_counted := NEW;
          delta := 1;
        ELSE
          row_counted := OLD;
          delta := -1;
        END IF;
        UPDATE ${BUDGET_LEDGER_TABLE} SET tool_executions = tool_executions + delta,
            tool_executions_by_name = tool_executions_by_name || jsonb_build_object(row_counted.tool_name,
              COALESCE((tool_executions_by_name ->> row_counted.tool_name)::integer, 0) + delta)
          WHERE root_turn_id = (SELECT root_turn_id FROM turnkit_turns WHERE id = row_counted.turn_id);
        RETURN NULL;
      END $$`,
  ];
}

function postgresTriggers(): string[] {
  const counted = (row: string) => `turnkit_execution_counted(${row}.status, ${row}.error)`;
  return [
    `CREATE TRIGGER turnkit_budget_turn_insert AFTER INSERT ON turnkit_turns
      FOR EACH ROW EXECUTE FUNCTION turnkit_budget_turn()`,
    `CREATE TRIGGER turnkit_budget_turn_update AFTER UPDATE OF options, cost ON turnkit_turns
      FOR EACH ROW WHEN (OLD.cost IS DISTINCT FROM NEW.cost
        OR turnkit_turn_iterations(OLD.options) IS DISTINCT FROM turnkit_turn_iterations(NEW.options))
      EXECUTE FUNCTION turnkit_budget_turn()`,
    `CREATE TRIGGER turnkit_budget_turn_delete AFTER DELETE ON turnkit_turns
      FOR EACH ROW WHEN (OLD.id = OLD.root_turn_id) EXECUTE FUNCTION turnkit_budget_turn()`,
    `CREATE TRIGGER turnkit_budget_execution_insert AFTER INSERT ON turnkit_tool_executions
      FOR EACH ROW WHEN (${counted('NEW')}) EXECUTE FUNCTION turnkit_budget_execution()`,
    `CREATE TRIGGER turnkit_budget_execution_update AFTER UPDATE OF status, error ON turnkit_tool_executions
      FOR EACH ROW WHEN (${counted('OLD')} IS DISTINCT FROM ${counted('NEW')})
      EXECUTE FUNCTION turnkit_budget_execution()`,
  ];
}

function postgresBackfill(): string[] {
  return [
    `INSERT INTO ${BUDGET_LEDGER_TABLE} (root_turn_id, iterations, cost, tool_executions, tool_executions_by_name)
      SELECT root_turn_id, SUM(turnkit_turn_iterations(options)), SUM(cost), 0, '{}'
        FROM turnkit_turns GROUP BY root_turn_id`,
    `UPDATE ${BUDGET_LEDGER_TABLE} l SET tool_executions = c.total, tool_executions_by_name = c.by_name
      FROM (SELECT root_turn_id, SUM(n)::integer AS total, jsonb_object_agg(tool_name, n) AS by_name
        FROM (SELECT t.root_turn_id, e.tool_name, COUNT(*) AS n FROM turnkit_tool_executions e
          JOIN turnkit_turns t ON t.id = e.turn_id
          WHERE turnkit_execution_counted(e.status, e.error)
          GROUP BY t.root_turn_id, e.tool_name) per_name
        GROUP BY root_turn_id) c
      WHERE l.root_turn_id = c.root_turn_id`,
  ];
}

/** Migration 5's ledger: the table, its triggers, and the counters of every tree already stored. */
export function budgetLedgerStatements(t: DialectTypes, dialect: DialectName): string[] {
  return dialect === 'sqlite'
    ? [ledgerTable(t), ...sqliteTriggers(), ...sqliteBackfill()]
    : [ledgerTable(t), ...postgresFunctions(), ...postgresTriggers(), ...postgresBackfill()];
}
