import { MemoryStore } from '../../src/store/memory-store.js';
import { describeStoreContract } from './contract.js';

describeStoreContract('memory', async () => {
  const store = new MemoryStore();
  return { store, close: () => store.close() };
});
