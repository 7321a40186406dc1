/**
 * Standard Schema v1 and Standard JSON Schema v1 (standardschema.dev), the interfaces zod,
 * valibot, arktype and others implement. Their shape is copied here, as the spec invites
 * libraries to do, so a tool takes any of them without a dependency on `@standard-schema/spec`.
 */

/** A schema of any Standard Schema library: `~standard.validate` checks a value. */
export interface StandardSchemaV1<Input = unknown, Output = Input> {
  readonly '~standard': StandardSchemaProps<Input, Output>;
}

interface StandardSchemaProps<Input = unknown, Output = Input> {
  readonly version: 1;
  readonly vendor: string;
  readonly types?: { readonly input: Input; readonly output: Output } | undefined;
  readonly validate: (
    value: unknown,
    options?: { readonly libraryOptions?: Record<string, unknown> | undefined },
  ) => StandardResult<Output> | Promise<StandardResult<Output>>;
  /** Standard JSON Schema v1: how the schema converts itself to JSON Schema, when it can. */
  readonly jsonSchema?:
    | {
        readonly input: (options: { readonly target: string }) => Record<string, unknown>;
        readonly output: (options: { readonly target: string }) => Record<string, unknown>;
      }
    | undefined;
}

export type StandardResult<Output> =
  { readonly value: Output; readonly issues?: undefined } | { readonly issues: ReadonlyArray<StandardIssue> };

export interface StandardIssue {
  readonly message: string;
  readonly path?: ReadonlyArray<PropertyKey | { readonly key: PropertyKey }> | undefined;
}

/** The type a Standard Schema validates to. */
export type StandardOutput<Schema extends StandardSchemaV1> = NonNullable<
  Schema['~standard']['types']
>['output'];

export function isStandardSchema(value: unknown): value is StandardSchemaV1 {
  if ((typeof value !== 'object' && typeof value !== 'function') || value === null) return false;
  const props = (value as { '~standard'?: unknown })['~standard'];
  return (
    typeof props === 'object' &&
    props !== null &&
    (props as { version?: unknown }).version === 1 &&
    typeof (props as { validate?: unknown }).validate === 'function'
  );
}

/** Issues as TurnKit's argument errors read them: `path: message`, joined by `; `. */
export function issuesText(issues: readonly StandardIssue[]): string {
  return issues
    .map((issue) => {
      const path = (issue.path ?? [])
        .map((segment) => String(typeof segment === 'object' ? segment.key : segment))
        .join('.');
      return `${path || '(arguments)'}: ${issue.message}`;
    })
    .join('; ');
}
