/**
 * `turnkit eval <agent>`: a replay evaluation (docs/fork-and-eval.md). Cases from a JSONL file
 * (`--cases`) or from recorded runs (`--since`, `--until`, `--tag`); a JSON and an HTML report;
 * exit code 6 on a regression beyond `--threshold`, for CI. Variants and scorers come from the
 * agents module (`variants`, `scorers`).
 */
import { readFile, writeFile } from 'node:fs/promises';
import type { Command } from 'commander';
import { evaluate } from '../eval/evaluate.js';
import type { EvaluateOptions, EvalVariant } from '../eval/evaluate.js';
import type { EvalReport } from '../eval/eval-report.js';
import { renderHtmlReport } from '../eval/html-report.js';
import { costScorer, exactMatch, latencyScorer, regexMatch } from '../eval/scorers.js';
import type { ScorerInput } from '../eval/scorers.js';
import { CliError, numberFlag } from './project.js';
import { EXIT_CODES, jsonText, terminalSafe, write } from './render.js';
import type { ScheduleCommandContext } from './schedule-commands.js';

interface EvalFlags {
  cases?: string;
  since?: string;
  until?: string;
  tag?: string[];
  limit?: string;
  realTools?: boolean;
  concurrency?: string;
  maxSpendPerCase?: string;
  maxSpend?: string;
  baseline?: string;
  variants?: string;
  scorer?: string[];
  threshold?: string;
  out?: string;
  html?: string;
  name?: string;
}

/** `exact`, `regex[:pattern]`, `cost:<usd>`, `latency:<ms>`, or a scorer the module exports by name. */
function scorersOf(names: string[] | undefined, exported: readonly ScorerInput[]): ScorerInput[] | undefined {
  if (!names?.length) return exported.length ? [...exported] : undefined;
  return names.map((spec) => {
    const [kind, ...rest] = spec.split(':');
    const arg = rest.join(':');
    if (kind === 'exact') return exactMatch();
    if (kind === 'regex') return regexMatch(arg || undefined);
    if (kind === 'cost') return costScorer(numberFlag('--scorer cost', arg)!);
    if (kind === 'latency') return latencyScorer(numberFlag('--scorer latency', arg)!);
    const named = exported.find(
      (scorer) => (typeof scorer === 'function' ? scorer.name : scorer.name) === spec,
    );
    if (named) return named;
    throw new CliError(
      `unknown scorer ${spec}: exact, regex[:re], cost:<usd>, latency:<ms> or one the module exports`,
      EXIT_CODES.usage,
    );
  });
}

function variantsOf(
  names: string | undefined,
  exported: readonly EvalVariant[],
): EvaluateOptions['variants'] {
  if (!names) return undefined;
  const picked = names.split(',').map((name) => {
    const variant = exported.find((candidate) => candidate.name === name.trim());
    if (!variant)
      throw new CliError(
        `unknown variant ${name}: the module exports ${exported.map((v) => v.name).join(', ') || 'none'}`,
        EXIT_CODES.usage,
      );
    return variant;
  });
  if (picked.length !== 2) throw new CliError('--variants names two variants: A,B', EXIT_CODES.usage);
  return [picked[0]!, picked[1]!];
}

async function baselineOf(flag: string | undefined): Promise<EvaluateOptions['baseline']> {
  if (flag === undefined || flag === 'recorded' || flag === 'none') return flag;
  try {
    return JSON.parse(await readFile(flag, 'utf8')) as EvalReport;
  } catch (error) {
    throw new CliError(
      `--baseline ${flag}: not a readable report (${(error as Error).message})`,
      EXIT_CODES.usage,
    );
  }
}

function summaryLines(report: EvalReport): string[] {
  const lines = report.summary.map(
    (s) =>
      `${s.variant}: ${s.passed}/${s.cases} passed, score ${s.meanScore?.toFixed(2) ?? '-'} (baseline ${s.baselineMeanScore?.toFixed(2) ?? '-'}), ` +
      `cost $${s.cost.toFixed(4)}, ${s.outputChanged} outputs and ${s.toolCallsChanged} tool calls changed, ${s.divergences} divergent, ${s.regressions} regressions`,
  );
  for (const r of report.regressions) lines.push(`regression: ${r.caseId} (${r.variant}): ${r.reason}`);
  return lines.map(terminalSafe);
}

export function addEvalCommand(program: Command, ctx: ScheduleCommandContext): void {
  program
    .command('eval')
    .description('evaluate <agent> on cases from --cases <jsonl> or recorded runs; exit 6 on a regression')
    .argument('<agent>')
    .option('--cases <file>', 'a JSONL file of { input, expected?, tags?, id? } (default: recorded runs)')
    .option('--since <time>', 'recorded runs created at or after this time')
    .option('--until <time>', 'recorded runs created before this time')
    .option('--tag <tag...>', 'recorded runs whose conversation metadata.tags hold these')
    .option('--limit <n>', 'at most this many recorded runs')
    .option('--real-tools', 'run the real tools instead of replaying the recorded results')
    .option('--concurrency <n>', 'cases at once (default 4)')
    .option('--max-spend-per-case <usd>', 'budget of each case')
    .option('--max-spend <usd>', 'budget of the whole evaluation (no case starts past it)')
    .option('--baseline <recorded|none|report.json>', 'what each case is compared with')
    .option('--variants <A,B>', 'two variants the agents module exports (`variants`)')
    .option(
      '--scorer <spec...>',
      'exact, regex[:re], cost:<usd>, latency:<ms>, or a scorer the module exports',
    )
    .option('--threshold <score>', 'a score drop beyond this is a regression (default 0)')
    .option('--out <file>', 'write the JSON report here')
    .option('--html <file>', 'write the HTML report here')
    .option('--name <name>', "the report's title")
    .action(
      ctx.run(true, async (client, module, agent: string, flags: EvalFlags) => {
        if (!module!.agents.has(agent))
          throw new CliError(`unknown agent ${agent}: the module has ${module!.agents.names.join(', ')}`);
        const limit = numberFlag('--limit', flags.limit);
        const perCase = numberFlag('--max-spend-per-case', flags.maxSpendPerCase);
        const total = numberFlag('--max-spend', flags.maxSpend);
        const scorers = scorersOf(flags.scorer, module!.scorers ?? []);
        const variants = variantsOf(flags.variants, module!.variants ?? []);
        const report = await evaluate({
          client,
          agent,
          cases: flags.cases
            ? { file: flags.cases }
            : {
                recorded: {
                  ...(flags.since ? { since: flags.since } : {}),
                  ...(flags.until ? { until: flags.until } : {}),
                  ...(flags.tag ? { tags: flags.tag } : {}),
                  ...(limit !== undefined ? { limit } : {}),
                },
              },
          ...(flags.realTools ? { tools: 'real' as const } : {}),
          ...(flags.concurrency ? { concurrency: numberFlag('--concurrency', flags.concurrency)! } : {}),
          budget: {
            ...(perCase !== undefined ? { perCase } : {}),
            ...(total !== undefined ? { total } : {}),
          },
          baseline: await baselineOf(flags.baseline),
          ...(scorers ? { scorers } : {}),
          ...(variants ? { variants } : {}),
          ...(flags.threshold ? { threshold: numberFlag('--threshold', flags.threshold)! } : {}),
          ...(flags.name ? { name: flags.name } : {}),
        });
        if (flags.out) await writeFile(flags.out, jsonText(report));
        if (flags.html) await writeFile(flags.html, renderHtmlReport(report));
        if (ctx.json()) write(ctx.out, `${jsonText(report)}\n`);
        else write(ctx.out, `${summaryLines(report).join('\n')}\n`);
        return report.passed ? 0 : EXIT_CODES.regression;
      }),
    );
}
