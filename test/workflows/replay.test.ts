import { readdirSync, readFileSync } from 'node:fs';
import { historyFromJSON } from '@temporalio/common/lib/proto-utils.js';
import { Resource } from '@opentelemetry/resources';
import { InMemorySpanExporter } from '@opentelemetry/sdk-trace-base';
import { makeWorkflowExporter } from '@temporalio/interceptors-opentelemetry';
import { Worker } from '@temporalio/worker';
import { describe, expect, it } from 'vitest';
import { bundleTurnWorkflows } from '../../src/worker.js';

const dir = new URL('../fixtures/histories/', import.meta.url);
const histories = readdirSync(dir).filter((file) => file.endsWith('.json'));

// A change to the workflow's command sequence that breaks these needs `patched()`.
describe('turn workflow replays its recorded histories deterministically', () => {
  it('has recorded histories to replay', () => {
    expect(histories.length).toBeGreaterThanOrEqual(5);
  });

  for (const file of histories) {
    it(`replays ${file}`, async () => {
      const history = historyFromJSON(JSON.parse(readFileSync(new URL(file, dir), 'utf8')));
      await Worker.runReplayHistory({ workflowBundle: await bundleTurnWorkflows() }, history);
    });
  }

  // A traced worker's bundle adds Temporal's OpenTelemetry workflow interceptors: headers only.
  for (const file of histories) {
    it(`replays ${file} on the traced bundle`, async () => {
      const history = historyFromJSON(JSON.parse(readFileSync(new URL(file, dir), 'utf8')));
      const exporter = makeWorkflowExporter(new InMemorySpanExporter(), new Resource({}));
      await Worker.runReplayHistory(
        { workflowBundle: await bundleTurnWorkflows({ traced: true }), sinks: { exporter } },
        history,
      );
    });
  }
});
