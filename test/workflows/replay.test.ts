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

describe('replay under queries (issue 26)', () => {
  it('long-lived: replays querybusy.json, where queries were answered while a slow claim was out past workflow-task heartbeats', async () => {
    const json = JSON.parse(readFileSync(new URL('querybusy.json', dir), 'utf8')) as {
      events: { eventType: string; markerRecordedEventAttributes?: { markerName: string } }[];
    };
    const types = json.events.map((e) => e.eventType.replace('EVENT_TYPE_', ''));
    // What the recording holds: the 0.5 marker only, and the claim's marker after heartbeats
    // (workflow tasks completed with nothing while the local activity was out).
    const markers = json.events.flatMap((e) => e.markerRecordedEventAttributes?.markerName ?? []);
    expect(markers.filter((name) => name === 'core_patch')).toHaveLength(1);
    const claimMarker = types.indexOf('MARKER_RECORDED', types.indexOf('MARKER_RECORDED') + 1);
    const heartbeats = types.slice(0, claimMarker).filter((t) => t === 'WORKFLOW_TASK_COMPLETED').length;
    expect(heartbeats).toBeGreaterThanOrEqual(3);
    const history = historyFromJSON(json);
    await Worker.runReplayHistory({ workflowBundle: await bundleTurnWorkflows() }, history);
  });
});

describe('release 0.6 histories (decision 82)', () => {
  it('the turn at the floor shape: floor-tools.json claims in its first model step and has no local activity', () => {
    const json = JSON.parse(readFileSync(new URL('floor-tools.json', dir), 'utf8')) as {
      events: {
        markerRecordedEventAttributes?: { markerName: string };
        activityTaskScheduledEventAttributes?: { activityType: { name: string } };
      }[];
    };
    const markers = json.events.flatMap((e) => e.markerRecordedEventAttributes?.markerName ?? []);
    const activities = json.events.flatMap(
      (e) => e.activityTaskScheduledEventAttributes?.activityType.name ?? [],
    );
    expect(markers).toEqual(['core_patch']);
    expect(activities).toEqual(['claimStep', 'toolCall', 'toolCall']);
  });

  it('decision 87: floor-tools.json starts no root timer and upserts its status once, at the end; floor-busy.json shows `pending` while the lane refuses it', () => {
    const types = (name: string) =>
      (
        JSON.parse(readFileSync(new URL(name, dir), 'utf8')) as { events: { eventType: string }[] }
      ).events.map((e) => e.eventType.replace('EVENT_TYPE_', ''));
    const tools = types('floor-tools.json');
    expect(tools).not.toContain('TIMER_STARTED');
    // The patch's TemporalChangeVersion upsert, then only the final status.
    expect(tools.filter((t) => t === 'UPSERT_WORKFLOW_SEARCH_ATTRIBUTES')).toHaveLength(2);
    expect(tools.lastIndexOf('UPSERT_WORKFLOW_SEARCH_ATTRIBUTES')).toBe(tools.length - 2);
    const busy = types('floor-busy.json');
    // Refused: `pending` and the nudge's timer; claimed: `running`, then the final status.
    expect(busy.filter((t) => t === 'UPSERT_WORKFLOW_SEARCH_ATTRIBUTES')).toHaveLength(4);
    expect(busy.indexOf('TIMER_STARTED')).toBe(busy.indexOf('UPSERT_WORKFLOW_SEARCH_ATTRIBUTES', 6) + 1);
  });
});
