/**
 * A tool's input schema: a zod object, or any Standard Schema that converts itself to JSON
 * Schema (Standard JSON Schema v1: zod, arktype, valibot through `toStandardJsonSchema`, …).
 * The model sees the JSON Schema; its arguments are checked before the tool runs, with
 * TurnKit's messages (spec §4.9) whatever library the schema comes from.
 */
import { z } from 'zod';
import { ArgumentError, ToolValidationError } from '../errors.js';
import type { JsonObject } from '../store/types.js';
import type { StandardSchemaV1 } from './standard-schema.js';
import { isStandardSchema, issuesText } from './standard-schema.js';

/** What `input` may be: zod objects take the zod path, any other Standard Schema its own. */
export type ToolInputSchema = z.ZodObject | StandardSchemaV1;

export function isToolInputSchema(value: unknown): value is ToolInputSchema {
  return value instanceof z.ZodObject || isStandardSchema(value);
}

/**
 * The JSON Schema (draft 7) the model sees for `input`: zod's own conversion, or the Standard
 * Schema's `~standard.jsonSchema.input`. It must describe an object (tool arguments are one).
 */
export function inputJsonSchema(tool: string, input: unknown): JsonObject {
  if (!isToolInputSchema(input))
    throw new ArgumentError(
      `tool ${tool}: input must be a zod object schema (z.object({...})) or a Standard Schema (~standard)`,
    );
  let json: JsonObject;
  if (input instanceof z.ZodObject) {
    json = z.toJSONSchema(input, { target: 'draft-7', io: 'input' }) as JsonObject;
  } else {
    const props = input['~standard'];
    if (typeof props.jsonSchema?.input !== 'function')
      throw new ArgumentError(
        `tool ${tool}: its ${props.vendor} schema cannot convert itself to JSON Schema (~standard.jsonSchema), ` +
          'which the model needs; use a library version that implements Standard JSON Schema, or zod',
      );
    try {
      json = JSON.parse(JSON.stringify(props.jsonSchema.input({ target: 'draft-07' }))) as JsonObject;
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      throw new ArgumentError(`tool ${tool}: its ${props.vendor} schema has no JSON Schema: ${message}`);
    }
  }
  delete json['$schema'];
  if (json['type'] !== 'object')
    throw new ArgumentError(
      `tool ${tool}: input must describe an object (its JSON Schema has type "object")`,
    );
  const properties = json['properties'];
  if (properties && typeof properties === 'object' && 'context' in properties)
    throw new ArgumentError(`tool ${tool}: the argument name "context" is reserved`);
  return json;
}

/**
 * TurnKit's checks (spec §4.9): unknown keys, then missing required ones, then the schema's
 * own validation. Returns the validated arguments (defaults filled where the schema fills them).
 */
export async function parseToolInput(
  tool: { name: string; input: ToolInputSchema; jsonSchema: JsonObject },
  args: JsonObject,
): Promise<unknown> {
  const { name, input } = tool;
  if (input instanceof z.ZodObject) return parseZod(name, input, args);
  checkNames(tool.jsonSchema, args);
  const result = await input['~standard'].validate(args);
  if (result.issues)
    throw new ToolValidationError(`invalid arguments for ${name}: ${issuesText(result.issues)}`);
  return result.value;
}

async function parseZod(name: string, input: z.ZodObject, args: JsonObject): Promise<unknown> {
  const shape = input.shape as Record<string, z.ZodType>;
  const unknown = Object.keys(args).filter((key) => !(key in shape));
  if (unknown.length > 0) throw new ToolValidationError(`unknown argument(s): ${unknown.join(', ')}`);
  for (const [key, schema] of Object.entries(shape)) {
    if (args[key] === undefined && !schema.safeParse(undefined).success) {
      throw new ToolValidationError(`missing required argument: ${key}`);
    }
  }
  const parsed = await input.safeParseAsync(args);
  if (!parsed.success)
    throw new ToolValidationError(`invalid arguments for ${name}: ${issuesText(parsed.error.issues)}`);
  return parsed.data;
}

/**
 * Unknown and missing arguments read from the JSON Schema the model saw: a key outside its
 * `properties` is unknown unless the schema lets extra keys in, as zod tools' are.
 */
function checkNames(json: JsonObject, args: JsonObject): void {
  const properties = json['properties'];
  const extra = json['additionalProperties'];
  if (properties && typeof properties === 'object' && !Array.isArray(properties)) {
    const open = extra === true || (typeof extra === 'object' && extra !== null);
    const unknown = open ? [] : Object.keys(args).filter((key) => !(key in properties));
    if (unknown.length > 0) throw new ToolValidationError(`unknown argument(s): ${unknown.join(', ')}`);
  }
  const required = Array.isArray(json['required']) ? json['required'] : [];
  for (const key of required)
    if (typeof key === 'string' && args[key] === undefined)
      throw new ToolValidationError(`missing required argument: ${key}`);
}
