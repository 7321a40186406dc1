/**
 * What a person sees of a running turn in the stock Temporal UI: the workflow's current
 * details (phase, iteration against its limit, the tool running, tokens and cost so far) and
 * the `state` query. Built from digests only: ids, counts, names, never the transcript.
 * Neither is a command, so replays and recorded histories are unaffected.
 */
import { setCurrentDetails, setHandler } from '@temporalio/workflow';
import type { TurnConsoleState } from './contract.js';
import { consoleTurnUrl, stateQuery } from './contract.js';
import type { TurnDigest } from '../contract/digests.js';

export class TurnConsole {
  readonly #state: TurnConsoleState;

  readonly #link: string | null;

  /** `consoleUrl`: the web console's base, linked from the current details (decision 46). */
  constructor(turnId: string, consoleUrl?: string) {
    this.#link = consoleTurnUrl(consoleUrl, turnId);
    this.#state = {
      turnId,
      status: 'pending',
      phase: null,
      iteration: 0,
      maxIterations: null,
      modelCalls: 0,
      model: null,
      runningTools: [],
      lastStep: null,
      tokens: 0,
      cost: 0,
    };
    setHandler(stateQuery, () => ({ ...this.#state, runningTools: [...this.#state.runningTools] }));
  }

  /** Takes what a digest says about the turn as committed in the store. */
  digest(digest: Pick<TurnDigest, 'status' | 'phase' | 'progress'>): void {
    this.#state.status = digest.status;
    this.#state.phase = digest.phase;
    if (digest.progress) {
      this.#state.iteration = digest.progress.iteration;
      this.#state.maxIterations = digest.progress.maxIterations;
      this.#state.tokens = digest.progress.tokens;
      this.#state.cost = digest.progress.cost;
    }
    this.#show();
  }

  update(patch: Partial<TurnConsoleState>): void {
    Object.assign(this.#state, patch);
    this.#show();
  }

  toolStarted(name: string): void {
    this.#state.runningTools = [...this.#state.runningTools, name];
    this.#show();
  }

  toolFinished(name: string, status: string): void {
    const at = this.#state.runningTools.indexOf(name);
    if (at >= 0) this.#state.runningTools = this.#state.runningTools.filter((_, i) => i !== at);
    this.#state.lastStep = `tool ${name} ${status}`;
    this.#show();
  }

  #show(): void {
    const s = this.#state;
    const iteration = s.maxIterations ? `${s.iteration} of ${s.maxIterations}` : String(s.iteration);
    const lines = [
      `**${s.status}**${s.phase && s.status === 'running' ? ` · ${s.phase} phase` : ''} · iteration ${iteration}`,
      `tokens ${s.tokens} · cost $${s.cost.toFixed(4)} · model calls ${s.modelCalls}${s.model ? ` · model \`${s.model}\`` : ''}`,
    ];
    if (s.runningTools.length > 0)
      lines.push(`running: ${s.runningTools.map((name) => `\`${name}\``).join(', ')}`);
    if (s.lastStep) lines.push(`last step: ${s.lastStep}`);
    if (this.#link) lines.push(`[open in the TurnKit console](${this.#link})`);
    setCurrentDetails(lines.join('\n\n'));
  }
}
