/** Output checks outside a turn: TurnKit's `check_output_policy`, public API. */
import { alongChain } from '../../models/fallback.js';
import type { ModelChoice } from '../../models/model-chain.js';
import { modelChain } from '../../models/model-chain.js';
import type {
  ConstraintContext,
  OutputCheck,
  OutputConstraint,
  OutputPolicy,
} from '../../agents/output-policy.js';
import { isOutputPolicy } from '../../agents/output-policy.js';
import { ArgumentError, ConfigError } from '../../errors.js';
import type { ModelClient, Thinking } from '../../models/types.js';
import type { Json } from '../../store/types.js';
import { DEFAULT_POLICY_THINKING } from './judge.js';
import type { OutputAudit } from './violations.js';
import { runChecks } from './violations.js';

export interface CheckOutputPolicyOptions {
  /** Constraints (functions, `{ check }` objects) and policies, checked in order. */
  constraints: readonly (OutputConstraint | OutputCheck | OutputPolicy)[];
  /** Passed to constraints besides the output. */
  context?: Partial<ConstraintContext>;
  /** For LLM-judged policies without a client of their own. */
  client?: ModelClient;
  /** For LLM-judged policies without a model (or chain) of their own. */
  model?: ModelChoice;
  thinking?: Thinking | null;
  signal?: AbortSignal;
}

/**
 * Checks an output against constraints and policies outside a turn (TurnKit's
 * `check_output_policy`): returns the audit; judge calls are made but charged to nobody.
 */
export async function checkOutputPolicy(
  output: Json,
  options: CheckOutputPolicyOptions,
): Promise<OutputAudit> {
  if (!options || !Array.isArray(options.constraints)) {
    throw new ArgumentError('checkOutputPolicy needs { constraints: [...] }');
  }
  const constraints: OutputConstraint[] = [];
  const policies: OutputPolicy[] = [];
  for (const entry of options.constraints) {
    if (isOutputPolicy(entry)) policies.push(entry);
    else if (typeof entry === 'function') constraints.push(entry);
    else if (entry && typeof (entry as OutputCheck).check === 'function')
      constraints.push((value, context) => (entry as OutputCheck).check(value, context));
    else throw new ArgumentError('checkOutputPolicy: a constraint must be a function, { check } or a policy');
  }
  const isText = typeof output === 'string';
  const context: ConstraintContext = {
    turn: options.context?.turn ?? null,
    outputText: options.context?.outputText ?? (isText ? output : null),
    outputData: options.context?.outputData ?? (isText ? null : output),
  };
  const signal = options.signal ?? new AbortController().signal;
  const violations = await runChecks(
    { constraints, policies },
    context,
    (policy) => {
      const client = policy.client ?? options.client;
      const choice = policy.model ?? options.model;
      if (!client || !choice) {
        throw new ConfigError(`output policy ${policy.name} needs a client and a model outside a turn`);
      }
      const chain = modelChain(choice, 'checkOutputPolicy model');
      return {
        client: alongChain(client, chain),
        model: chain[0]!,
        thinking: policy.thinking ?? options.thinking ?? DEFAULT_POLICY_THINKING,
        metadata: { turnId: '', conversationId: '', agentName: '', purpose: 'output_policy' },
        signal,
      };
    },
    async () => [],
  );
  return { clean: violations.length === 0, violations };
}
