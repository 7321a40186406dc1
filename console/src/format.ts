export function formatCost(usd: number | null | undefined): string {
  if (usd === null || usd === undefined) return '—';
  return usd === 0 ? '$0' : usd < 0.01 ? `$${usd.toFixed(4)}` : `$${usd.toFixed(2)}`;
}

export function formatMs(ms: number | null | undefined): string {
  if (ms === null || ms === undefined) return 'running';
  if (ms < 1_000) return `${ms} ms`;
  if (ms < 60_000) return `${(ms / 1_000).toFixed(1)} s`;
  return `${Math.floor(ms / 60_000)} min ${Math.round((ms % 60_000) / 1_000)} s`;
}

export function formatTime(iso: string | null | undefined): string {
  if (!iso) return '—';
  const date = new Date(iso);
  return date.toLocaleString(undefined, { dateStyle: 'short', timeStyle: 'medium' });
}

/** `turn_…4f2a9c1e`: ids share their time-ordered head, so the tail tells them apart. */
export function shortId(id: string): string {
  const prefix = id.slice(0, id.indexOf('_') + 1);
  return id.length > prefix.length + 10 ? `${prefix}…${id.slice(-8)}` : id;
}

export function principalText(principal: unknown): string {
  if (principal === null || principal === undefined) return '—';
  if (typeof principal === 'object' && principal !== null && 'id' in principal)
    return String((principal as { id: unknown }).id);
  return JSON.stringify(principal);
}

export const TERMINAL = ['completed', 'failed', 'cancelled', 'stale'];
