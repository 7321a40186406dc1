import { memoryDriver } from './sqlite-store.js';
import { SqlStore } from './sql/sql-store.js';

/**
 * The in-process store (backend `memory`, `memory:` URLs): the SQL store itself, on a private
 * SQLite database in memory (decision 60), so every rule of the store contract has one
 * implementation. Nothing survives `close()` or the process. It has one connection: a read
 * outside an open block waits for the block to end, then sees what it committed.
 */
export class MemoryStore extends SqlStore {
  constructor() {
    super(memoryDriver());
  }
}
