import { randomFillSync } from 'node:crypto';

export type IdPrefix = 'conv' | 'msg' | 'turn' | 'tool' | 'delivery' | 'eval' | 'erasure';

let lastMillis = 0;
let counter = 0;
/** Random bytes drawn a page at a time: one system call per 1,024 ids, not one per id. */
const pool = Buffer.alloc(4096);
let poolAt = pool.length;

function randomHex8(): string {
  if (poolAt + 4 > pool.length) {
    randomFillSync(pool);
    poolAt = 0;
  }
  poolAt += 4;
  return pool.toString('hex', poolAt - 4, poolAt);
}

/**
 * `<prefix>_<24 hex>`, as TurnKit. The first 12 hex digits are the creation time in
 * milliseconds and the next 4 a per-process counter, so ids sort in creation order and
 * "order by created_at, id" is creation order even within one millisecond.
 */
export function newId(prefix: IdPrefix): string {
  const now = Date.now();
  if (now === lastMillis) counter = (counter + 1) & 0xffff;
  else {
    lastMillis = now;
    counter = 0;
  }
  const time = now.toString(16).padStart(12, '0').slice(-12);
  const seq = counter.toString(16).padStart(4, '0');
  return `${prefix}_${time}${seq}${randomHex8()}`;
}
