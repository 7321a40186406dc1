/**
 * The worker half of OpenTelemetry: Temporal's interceptors for activities (and the client
 * activities use), the workflow interceptor module (bundled into a second, traced workflow
 * bundle) and the sink that hands the workflow's spans to the application's span processor.
 */
import { createRequire } from 'node:module';
import { Resource } from '@opentelemetry/resources';
import type { ReadableSpan, SpanProcessor } from '@opentelemetry/sdk-trace-base';
import {
  makeWorkflowExporter,
  OpenTelemetryActivityInboundInterceptor,
  OpenTelemetryActivityOutboundInterceptor,
} from '@temporalio/interceptors-opentelemetry';
import type { WorkerOptions } from '@temporalio/worker';
import type { Runtime } from './engine/runtime.js';
import type { TracingOptions } from './engine/telemetry/tracing.js';
import { workflowSpanProcessor } from './engine/telemetry/tracing.js';

/** Temporal's workflow interceptors for OpenTelemetry, made for the workflow sandbox. */
export const OTEL_WORKFLOW_INTERCEPTORS = createRequire(import.meta.url).resolve(
  '@temporalio/interceptors-opentelemetry/lib/workflow-interceptors',
);

/** A span processor whose failures are logged, never thrown into the worker's sink. */
function guarded(processor: SpanProcessor, logger: Pick<Console, 'warn'>): SpanProcessor {
  let warned = false;
  const guard = (fn: () => void) => {
    try {
      fn();
    } catch (error) {
      if (!warned) logger.warn('turnkit: the span processor failed on a workflow span:', error);
      warned = true;
    }
  };
  return {
    onStart: (span, ctx) => guard(() => processor.onStart(span, ctx)),
    onEnd: (span: ReadableSpan) => guard(() => processor.onEnd(span)),
    forceFlush: () => processor.forceFlush(),
    shutdown: () => processor.shutdown(),
  };
}

const dropping: SpanProcessor = {
  onStart: () => undefined,
  onEnd: () => undefined,
  forceFlush: async () => undefined,
  shutdown: async () => undefined,
};

/** The Worker options tracing adds; the caller bundles with OTEL_WORKFLOW_INTERCEPTORS. */
export function tracingWorkerOptions(runtime: Runtime, options: TracingOptions): Partial<WorkerOptions> {
  const tracer = runtime.telemetry.tracer!;
  const processor = workflowSpanProcessor(options);
  if (!processor) {
    runtime.logger.warn(
      'turnkit: tracing has no span processor for workflow spans (pass tracing.spanProcessor); they are dropped',
    );
  }
  const resource =
    (options.tracerProvider as { resource?: Resource }).resource ??
    new Resource({ 'service.name': 'turnkit' });
  return {
    interceptors: {
      workflowModules: [OTEL_WORKFLOW_INTERCEPTORS],
      activity: [
        (ctx) => ({
          inbound: new OpenTelemetryActivityInboundInterceptor(ctx, { tracer }),
          outbound: new OpenTelemetryActivityOutboundInterceptor(ctx),
        }),
      ],
    },
    // The bundled workflow interceptors always call this sink: without a processor it drops.
    sinks: { exporter: makeWorkflowExporter(guarded(processor ?? dropping, runtime.logger), resource) },
  };
}
