/**
 * OpenTelemetry, opt-in: with a tracer provider, Temporal's OpenTelemetry interceptors carry
 * one trace from `client.run` through the workflow to every activity, and TurnKit adds a span
 * per model call (`chat <model>`) and per tool call (`execute_tool <tool>`) with the GenAI
 * semantic conventions' attributes. Without one nothing is created. Transcript text goes into
 * no span unless `recordContent` is set. A tracer that throws is logged and ignored: tracing
 * never fails a turn.
 */
import type { Attributes, Context, Span, SpanOptions, Tracer, TracerProvider } from '@opentelemetry/api';
import { context, propagation, ROOT_CONTEXT, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { CompositePropagator, W3CBaggagePropagator, W3CTraceContextPropagator } from '@opentelemetry/core';
import type { SpanProcessor } from '@opentelemetry/sdk-trace-base';

export interface TracingOptions {
  /** The application's tracer provider (e.g. the one its NodeSDK registered). */
  tracerProvider: TracerProvider;
  /**
   * Receives the workflow's spans, which Temporal makes inside the workflow sandbox and hands
   * out through a sink. Default: the provider's own span processor, when it exposes one.
   */
  spanProcessor?: SpanProcessor;
  /** Puts prompts, completions, tool arguments and results into spans (default false). */
  recordContent?: boolean;
}

type Logger = Pick<Console, 'warn'>;

const INVALID = trace.wrapSpanContext({ traceId: '0'.repeat(32), spanId: '0'.repeat(16), traceFlags: 0 });

/** Calls into the user's tracer, logging (once per kind) instead of throwing. */
class Guard {
  readonly #warned = new Set<string>();
  constructor(readonly logger: Logger) {}

  run<T>(what: string, fn: () => T, fallback: T): T {
    try {
      return fn();
    } catch (error) {
      if (!this.#warned.has(what)) {
        this.#warned.add(what);
        this.logger.warn(`turnkit: the tracer failed (${what}); tracing goes on without it:`, error);
      }
      return fallback;
    }
  }
}

/** A span whose every method is guarded. */
function safeSpan(span: Span, guard: Guard): Span {
  const safe: Span = {
    spanContext: () => guard.run('spanContext', () => span.spanContext(), INVALID.spanContext()),
    setAttribute: (key, value) => (
      guard.run('setAttribute', () => span.setAttribute(key, value), span),
      safe
    ),
    setAttributes: (attributes) => (
      guard.run('setAttributes', () => span.setAttributes(attributes), span),
      safe
    ),
    addEvent: (name, attributes, time) => (
      guard.run('addEvent', () => span.addEvent(name, attributes, time), span),
      safe
    ),
    addLink: (link) => (guard.run('addLink', () => span.addLink(link), span), safe),
    addLinks: (links) => (guard.run('addLinks', () => span.addLinks(links), span), safe),
    setStatus: (status) => (guard.run('setStatus', () => span.setStatus(status), span), safe),
    updateName: (name) => (guard.run('updateName', () => span.updateName(name), span), safe),
    end: (time) => guard.run('end', () => span.end(time), undefined),
    isRecording: () => guard.run('isRecording', () => span.isRecording(), false),
    recordException: (exception, time) =>
      guard.run('recordException', () => span.recordException(exception, time), undefined),
  };
  return safe;
}

/** The user's tracer behind guards, so that Temporal's interceptors can never fail on it either. */
function safeTracer(tracer: Tracer, logger: Logger): Tracer {
  const guard = new Guard(logger);
  const startSpan = (name: string, options?: SpanOptions, ctx?: Context): Span =>
    safeSpan(
      guard.run('startSpan', () => tracer.startSpan(name, options, ctx), INVALID),
      guard,
    );
  const startActiveSpan = (name: string, ...rest: unknown[]): unknown => {
    const fn = rest.pop() as (span: Span) => unknown;
    const [options, ctx] = rest as [SpanOptions | undefined, Context | undefined];
    const parent = ctx ?? context.active();
    const span = startSpan(name, options, parent);
    return context.with(trace.setSpan(parent, span), fn, undefined, span);
  };
  return { startSpan, startActiveSpan } as Tracer;
}

/**
 * Temporal's interceptors read the active context and propagate it in headers through the
 * global API: when the application registered no context manager or propagator (NodeSDK does
 * both), the standard ones are registered, or the trace would break at the first hop.
 */
function ensureGlobals(): void {
  const probe = trace.setSpan(ROOT_CONTEXT, INVALID);
  if (context.with(probe, () => trace.getSpan(context.active())) !== INVALID) {
    context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  }
  if (propagation.fields().length === 0) {
    propagation.setGlobalPropagator(
      new CompositePropagator({ propagators: [new W3CTraceContextPropagator(), new W3CBaggagePropagator()] }),
    );
  }
}

export interface SpanHandle {
  set(attributes: Attributes): void;
  rename(name: string): void;
}

const NO_SPAN: SpanHandle = { set: () => undefined, rename: () => undefined };

/** What the engine traces with: a no-op without a tracer provider. */
export class Telemetry {
  readonly tracer: Tracer | undefined;
  readonly recordContent: boolean;

  constructor(options: TracingOptions | undefined, logger: Logger) {
    this.recordContent = options?.recordContent ?? false;
    if (!options?.tracerProvider) {
      this.tracer = undefined;
      return;
    }
    ensureGlobals();
    const guard = new Guard(logger);
    const tracer = guard.run('getTracer', () => options.tracerProvider.getTracer('turnkit'), undefined);
    this.tracer = tracer ? safeTracer(tracer, logger) : undefined;
  }

  get enabled(): boolean {
    return this.tracer !== undefined;
  }

  /** Runs fn inside a client span; a throw marks the span failed (and is rethrown). */
  async span<T>(name: string, attributes: Attributes, fn: (span: SpanHandle) => Promise<T>): Promise<T> {
    const tracer = this.tracer;
    if (!tracer) return fn(NO_SPAN);
    return tracer.startActiveSpan(name, { kind: SpanKind.CLIENT, attributes }, async (span: Span) => {
      const handle: SpanHandle = {
        set: (more) => span.setAttributes(withoutUndefined(more)),
        rename: (next) => span.updateName(next),
      };
      try {
        const result = await fn(handle);
        span.setStatus({ code: SpanStatusCode.OK });
        return result;
      } catch (error) {
        span.recordException(error instanceof Error ? error : String(error));
        span.setStatus({
          code: SpanStatusCode.ERROR,
          message: error instanceof Error ? error.message : String(error),
        });
        span.setAttribute('error.type', error instanceof Error ? error.name : 'Error');
        throw error;
      } finally {
        span.end();
      }
    });
  }
}

function withoutUndefined(attributes: Attributes): Attributes {
  return Object.fromEntries(
    Object.entries(attributes).filter(([, value]) => value !== undefined && value !== null),
  );
}

/** The span processor the workflow's spans go to: the given one, else the provider's own. */
export function workflowSpanProcessor(options: TracingOptions): SpanProcessor | undefined {
  if (options.spanProcessor) return options.spanProcessor;
  const provider = options.tracerProvider as { getActiveSpanProcessor?: () => SpanProcessor };
  return typeof provider.getActiveSpanProcessor === 'function'
    ? provider.getActiveSpanProcessor()
    : undefined;
}
