// THE COMPARISON (not TurnKit): the bench agent's tool, as an activity of the peer's worker.
import { lookup } from '../peer-model.js';

export async function lookupActivity(query: string): Promise<{ found: string }> {
  return lookup(query);
}
