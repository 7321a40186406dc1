export { MemoryStore } from './sqlite-store.js';
