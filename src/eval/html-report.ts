/**
 * A self-contained HTML page of an evaluation report: summary, charts of score, cost and
 * latency against the baseline (inline SVG), and a table per case. No external assets and no
 * script; every text from a run (outputs, inputs, errors) is escaped, since it is untrusted.
 */
import type { EvalCaseResult, EvalReport, VariantSummary } from './eval-report.js';

const escape = (text: string) =>
  text.replace(
    /[&<>"']/g,
    (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!,
  );

const COLORS = ['#4f46e5', '#0d9488'];
const BASELINE_COLOR = '#cbd5e1';

const usd = (value: number) => `$${value < 0.01 && value > 0 ? value.toFixed(5) : value.toFixed(4)}`;
const ms = (value: number | null) =>
  value === null ? '–' : value >= 1000 ? `${(value / 1000).toFixed(2)} s` : `${Math.round(value)} ms`;
const score = (value: number | null) => (value === null ? '–' : value.toFixed(2));

function delta(
  value: number | null | undefined,
  format: (n: number) => string,
  higherIsBetter: boolean,
): string {
  if (value === null || value === undefined || Math.abs(value) < 1e-9) return '';
  const good = value > 0 === higherIsBetter;
  return ` <span class="${good ? 'up' : 'down'}">${value > 0 ? '+' : '−'}${format(Math.abs(value))}</span>`;
}

interface Series {
  label: string;
  color: string;
  values: (number | null)[];
  /** Bars of regressed cases, drawn in red. */
  regressed?: boolean[];
}

const REGRESSED_COLOR = '#e11d48';
const plural = (count: number, word: string) => `${count} ${word}${count === 1 ? '' : 's'}`;

/** A grouped bar chart: one group per case, one bar per series. */
function barChart(title: string, labels: string[], series: Series[], format: (n: number) => string): string {
  const width = 960;
  const height = 220;
  const left = 64;
  const bottom = 28;
  const top = 30;
  const plot = height - top - bottom;
  const max = Math.max(1e-9, ...series.flatMap((s) => s.values.filter((v): v is number => v !== null)));
  const group = (width - left - 10) / Math.max(1, labels.length);
  const bar = Math.max(2, Math.min(18, (group * 0.8) / series.length));
  const bars = labels.flatMap((_, i) =>
    series.map((s, j) => {
      const value = s.values[i];
      if (value === null || value === undefined) return '';
      const h = (value / max) * plot;
      const x = left + i * group + (group - bar * series.length) / 2 + j * bar;
      return `<rect x="${x.toFixed(1)}" y="${(top + plot - h).toFixed(1)}" width="${(bar - 1).toFixed(1)}" height="${h.toFixed(1)}" fill="${s.regressed?.[i] ? REGRESSED_COLOR : s.color}" rx="1.5"><title>${escape(`${labels[i]} · ${s.label}: ${format(value)}`)}</title></rect>`;
    }),
  );
  const ticks = [0, 0.5, 1].map((f) => {
    const y = top + plot - f * plot;
    return `<line x1="${left}" x2="${width - 10}" y1="${y}" y2="${y}" class="grid"/><text x="${left - 6}" y="${y + 4}" text-anchor="end">${escape(format(max * f))}</text>`;
  });
  const caseLabels =
    labels.length <= 40
      ? labels.map(
          (label, i) =>
            `<text x="${(left + i * group + group / 2).toFixed(1)}" y="${height - 10}" text-anchor="middle">${escape(label)}</text>`,
        )
      : [];
  const keys = [
    ...series.map((s) => ({ label: s.label, color: s.color })),
    ...(series.some((s) => s.regressed?.some(Boolean))
      ? [{ label: 'regressed', color: REGRESSED_COLOR }]
      : []),
  ];
  const legend = keys.map(
    (key, j) =>
      `<rect x="${width - 10 - (keys.length - j) * 110}" y="6" width="10" height="10" fill="${key.color}" rx="2"/><text x="${width - 10 - (keys.length - j) * 110 + 14}" y="15">${escape(key.label)}</text>`,
  );
  return `<figure><figcaption>${escape(title)}</figcaption><svg viewBox="0 0 ${width} ${height}" role="img" aria-label="${escape(title)}">${ticks.join('')}${bars.join('')}${caseLabels.join('')}${legend.join('')}</svg></figure>`;
}

function charts(report: EvalReport): string {
  const ids = [...new Set(report.cases.map((result) => result.caseId))];
  const labels = ids.map((_, i) => `${i + 1}`);
  const byCase = (variant: string) =>
    ids.map((id) => report.cases.find((r) => r.caseId === id && r.variant === variant));
  const first = byCase(report.variants[0]!);
  const withBaseline = report.baseline !== 'none';
  const chart = (
    title: string,
    value: (r: EvalCaseResult) => number | null,
    baseline: (r: EvalCaseResult) => number | null | undefined,
    format: (n: number) => string,
  ) =>
    barChart(
      title,
      labels,
      [
        ...(withBaseline
          ? [
              {
                label: 'baseline',
                color: BASELINE_COLOR,
                values: first.map((r) => (r ? (baseline(r) ?? null) : null)),
              },
            ]
          : []),
        ...report.variants.map((variant, j) => ({
          label: variant,
          color: COLORS[j % COLORS.length]!,
          values: byCase(variant).map((r) => (r?.run ? value(r) : null)),
          regressed: byCase(variant).map((r) => Boolean(r?.regression)),
        })),
      ],
      format,
    );
  return [
    chart(
      'Score per case',
      (r) => r.score,
      (r) => r.baseline?.score,
      (n) => n.toFixed(2),
    ),
    chart(
      'Cost per case (USD)',
      (r) => r.run!.cost,
      (r) => r.baseline?.cost,
      usd,
    ),
    chart(
      'Latency per case',
      (r) => r.run!.latencyMs,
      (r) => r.baseline?.latencyMs,
      ms,
    ),
  ].join('');
}

function card(label: string, value: string, note = ''): string {
  return `<div class="card"><div class="label">${escape(label)}</div><div class="value">${value}</div><div class="note">${note}</div></div>`;
}

function summaryCards(summary: VariantSummary, index: number): string {
  const dot = `<span class="dot" style="background:${COLORS[index % COLORS.length]}"></span>`;
  const vs = (value: string) => `baseline ${value}`;
  return `<section class="variant"><h2>${dot}${escape(summary.variant)}</h2><div class="cards">${[
    card(
      'Mean score',
      `${score(summary.meanScore)}${delta(summary.meanScore !== null && summary.baselineMeanScore !== null ? summary.meanScore - summary.baselineMeanScore : null, (n) => n.toFixed(2), true)}`,
      vs(score(summary.baselineMeanScore)),
    ),
    card(
      'Passed',
      `${summary.passed} / ${summary.cases}`,
      summary.skipped ? `${summary.skipped} skipped` : '',
    ),
    card(
      'Cost',
      `${usd(summary.cost)}${delta(summary.cost - summary.baselineCost, usd, false)}`,
      vs(usd(summary.baselineCost)),
    ),
    card('Latency p50', ms(summary.latencyP50Ms), vs(ms(summary.baselineLatencyP50Ms))),
    card(
      'Changed',
      `${plural(summary.outputChanged, 'output')} · ${plural(summary.toolCallsChanged, 'tool call')}`,
      `${plural(summary.divergences, 'case')} with tool divergences`,
    ),
    card(
      'Regressions',
      `<span class="${summary.regressions ? 'bad' : 'good'}">${summary.regressions}</span>`,
      '',
    ),
  ].join('')}</div></section>`;
}

function caseRow(result: EvalCaseResult, index: number): string {
  const run = result.run;
  const c = result.changes;
  const flags = [
    c?.output ? '<span class="tag">output</span>' : '',
    c?.toolCalls ? '<span class="tag warn">tool calls</span>' : '',
    result.divergences.length
      ? `<span class="tag bad" title="${escape(result.divergences.join('\n'))}">divergence</span>`
      : '',
  ].join(' ');
  const note = result.regression ?? result.skipped ?? result.divergences[0] ?? '';
  return `<tr class="${result.regression ? 'regressed' : ''}"><td class="num">${index}</td><td><div class="input">${escape(result.input.slice(0, 120))}</div><div class="meta">${escape(result.caseId)}${result.tags.length ? ` · ${escape(result.tags.join(', '))}` : ''}</div></td><td>${escape(result.variant)}</td><td>${run ? `<span class="status ${escape(run.status)}">${escape(run.status)}</span>` : '<span class="status skipped">skipped</span>'}</td><td class="num">${score(result.score)}${delta(c?.score, (n) => n.toFixed(2), true)}</td><td class="num">${run ? usd(run.cost) : '–'}${delta(c?.cost, usd, false)}</td><td class="num">${run ? ms(run.latencyMs) : '–'}${delta(c?.latencyMs, (n) => ms(n), false)}</td><td>${flags}</td><td class="note">${escape(note)}</td></tr>`;
}

const STYLE = `
:root{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#0f172a;background:#f8fafc}
body{margin:0;padding:28px 36px;max-width:1180px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:16px;margin:18px 0 8px;display:flex;align-items:center;gap:8px}
.sub{color:#64748b;font-size:13px}.verdict{display:inline-block;padding:3px 10px;border-radius:999px;font-weight:600;font-size:13px;margin-left:8px}
.verdict.ok{background:#dcfce7;color:#166534}.verdict.fail{background:#fee2e2;color:#991b1b}
.cards{display:grid;grid-template-columns:repeat(6,1fr);gap:10px}.card{background:#fff;border:1px solid #e2e8f0;border-radius:10px;padding:10px 12px}
.label{font-size:11px;text-transform:uppercase;letter-spacing:.04em;color:#64748b}.value{font-size:18px;font-weight:600;margin:4px 0 2px}.note{font-size:12px;color:#64748b}
.dot{width:10px;height:10px;border-radius:50%;display:inline-block}
figure{background:#fff;border:1px solid #e2e8f0;border-radius:10px;margin:14px 0;padding:10px 12px}figcaption{font-weight:600;font-size:13px;margin-bottom:4px}
svg{width:100%;height:auto;font-size:11px;fill:#475569}.grid{stroke:#e2e8f0}
table{width:100%;border-collapse:collapse;background:#fff;border:1px solid #e2e8f0;border-radius:10px;overflow:hidden;font-size:13px;margin-top:14px}
th{background:#f1f5f9;text-align:left;font-size:11px;text-transform:uppercase;letter-spacing:.04em;color:#475569;padding:8px}
td{padding:7px 8px;border-top:1px solid #f1f5f9;vertical-align:top}td.num{text-align:right;white-space:nowrap;font-variant-numeric:tabular-nums}
tr.regressed td{background:#fff1f2}.input{max-width:300px}.meta{color:#94a3b8;font-size:11px}
.up{color:#15803d;font-size:11px}.down{color:#b91c1c;font-size:11px}.good{color:#15803d}.bad{color:#b91c1c}
.tag{display:inline-block;font-size:11px;padding:1px 6px;border-radius:6px;background:#e0e7ff;color:#3730a3;margin:1px}
.tag.warn{background:#fef3c7;color:#92400e}.tag.bad{background:#fee2e2;color:#991b1b}
.status{font-size:11px;padding:1px 6px;border-radius:6px;background:#e2e8f0}.status.completed{background:#dcfce7;color:#166534}.status.failed,.status.cancelled{background:#fee2e2;color:#991b1b}
td.note{color:#64748b;font-size:12px;max-width:260px}`;

/** The report as one HTML page. */
export function renderHtmlReport(report: EvalReport): string {
  const verdict = report.passed
    ? '<span class="verdict ok">no regressions</span>'
    : `<span class="verdict fail">${report.regressions.length} regression${report.regressions.length === 1 ? '' : 's'}</span>`;
  const sub = [
    `agent ${report.agent}`,
    `tools ${report.tools}`,
    `baseline ${report.baseline}`,
    `${new Set(report.cases.map((r) => r.caseId)).size} cases`,
    `${(report.wallMs / 1000).toFixed(1)} s wall, up to ${report.maxParallel} at once`,
    `total cost ${usd(report.cost)}`,
    report.startedAt,
  ];
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'">
<title>${escape(report.name)}</title><style>${STYLE}</style></head>
<body><h1>${escape(report.name)}${verdict}</h1><div class="sub">${escape(sub.join(' · '))}</div>
${report.summary.map(summaryCards).join('')}
${charts(report)}
<table><thead><tr><th>#</th><th>case</th><th>variant</th><th>status</th><th>score</th><th>cost</th><th>latency</th><th>changed</th><th>notes</th></tr></thead>
<tbody>${report.cases.map((result, i) => caseRow(result, Math.floor(i / report.variants.length) + 1)).join('')}</tbody></table>
</body></html>
`;
}
