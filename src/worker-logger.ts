import type { LogEntry, LogLevel } from '@temporalio/worker';
import { DefaultLogger } from '@temporalio/worker';

const firstLine = (text: string) => text.split('\n')[0] ?? '';

/** `ModelError: provider error: …` of an error and its causes, one line. */
function errorLine(error: unknown): string {
  const parts: string[] = [];
  let said = '';
  for (let cause = error, depth = 0; cause instanceof Error && depth < 4; depth += 1) {
    const type = (cause as { type?: unknown }).type;
    const message = firstLine(cause.message);
    // A cause whose message its wrapper already quotes adds nothing to the line.
    if (!said.includes(message)) parts.push(`${typeof type === 'string' ? type : cause.name}: ${message}`);
    said += message;
    cause = cause.cause;
  }
  return parts.join(' ← ');
}

/**
 * A Temporal worker logger (`Runtime.install({ logger })`) that writes one line per entry: a
 * provider that keeps failing is one line per retry, not a stack per attempt. Stacks and the
 * rest of the entry's attributes are written at DEBUG and TRACE.
 */
export function conciseWorkerLogger(level: LogLevel = 'INFO', out: NodeJS.WritableStream = process.stderr) {
  const verbose = level === 'DEBUG' || level === 'TRACE';
  return new DefaultLogger(level, (entry: LogEntry) => {
    const { error, activityType, attempt, workflowType, workflowId, ...rest } = entry.meta ?? {};
    const time = new Date(Number(entry.timestampNanos / 1_000_000n)).toISOString();
    const what = [
      typeof activityType === 'string'
        ? `${activityType}${typeof attempt === 'number' ? ` attempt ${attempt}` : ''}`
        : '',
      typeof workflowType === 'string' && typeof workflowId === 'string'
        ? `${workflowType} ${workflowId}`
        : '',
    ].filter(Boolean);
    let line = `${time} [${entry.level}] ${entry.message}${what.length > 0 ? ` (${what.join(', ')})` : ''}`;
    if (error !== undefined) line += `: ${errorLine(error)}`;
    if (verbose) {
      if (Object.keys(rest).length > 0)
        line += ` ${JSON.stringify(rest, (_key, value: unknown) => (typeof value === 'bigint' ? String(value) : value))}`;
      if (error instanceof Error && error.stack) line += `\n${error.stack}`;
    }
    out.write(`${line}\n`);
  });
}
