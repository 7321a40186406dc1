/**
 * What the Temporal UI shows of an open lane (its current details): deliveries, turns started
 * and queued, and a step that keeps failing. Not a command: replay-neutral.
 */
import { setCurrentDetails } from '@temporalio/workflow';

export class LaneDetails {
  #delivered = 0;
  #started = 0;
  #queued = 0;
  #last: string | null = null;
  #failing = '';

  constructor(private readonly conversationId: string) {
    this.#show();
  }

  /** A lane step went through. */
  stepped(step: { delivered: number; started: string | null; queued?: number }): void {
    this.#failing = '';
    this.#delivered += step.delivered;
    this.#queued = step.queued ?? 0;
    if (step.started) {
      this.#started += 1;
      this.#last = step.started;
    }
    this.#show();
  }

  /** Steps failed `count` times in a row, and the lane waits for the next wake. */
  failing(count: number, last?: string): void {
    this.#failing =
      `\n\n**lane step failing**: ${count} in a row, waiting for the next wake` +
      (last ? `; last error: ${last.slice(0, 200)}` : '');
    this.#show();
  }

  #show(): void {
    setCurrentDetails(
      `**conversation** \`${this.conversationId}\` · delivered ${this.#delivered} · turns started ${this.#started}` +
        ` · queued ${this.#queued}${this.#last ? `\n\nlast started \`${this.#last}\`` : ''}${this.#failing}`,
    );
  }
}
