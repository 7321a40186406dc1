export function formatCost(usd: number | null | undefined): string {
  if (usd === null || usd === undefined) return '—';
  return usd === 0 ? '$0' : usd < 0.01 ? `$${usd.toFixed(4)}` : `$${usd.toFixed(2)}`;
}

export function formatMs(ms: number | null | undefined): string {
  if (ms === null || ms === undefined) return 'running';
  if (ms < 1_000) return `${ms} ms`;
  if (ms < 59_950) return `${(ms / 1_000).toFixed(1)} s`;
  // Round to whole seconds first: 299.6 s is 5 min 0 s, never 4 min 60 s.
  const seconds = Math.round(ms / 1_000);
  return `${Math.floor(seconds / 60)} min ${seconds % 60} s`;
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

/** A status as people read it: a waiting turn says what it waits for. */
export function statusText(status: string, waitingFor?: string | null): string {
  if (waitingFor === 'approval') return 'awaiting approval';
  if (waitingFor === 'sub-agents') return 'waiting for sub-agents';
  return status;
}

/** The AI SDK's tool part states, in words. */
const TOOL_STATES: Record<string, string> = {
  'input-streaming': 'preparing',
  'input-available': 'running',
  'approval-requested': 'awaiting approval',
  'approval-responded': 'decided',
  'output-available': 'done',
  'output-error': 'failed',
  'output-denied': 'rejected',
};

export function toolStateText(state: string): string {
  return TOOL_STATES[state] ?? state.replace(/-/g, ' ');
}
