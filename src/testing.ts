// `turnkit/testing`: offline models for an application's own tests (the way `ai/test` ships
// the AI SDK's mocks). Scripts are keyed by agent name; every step is recorded for assertions.
export { ScriptedModel, reply, toolCall } from './models/scripted-model.js';
export type {
  Script,
  ScriptedModelOptions,
  ScriptedStep,
  ScriptedStepObject,
  ScriptedToolCall,
  ScriptFunction,
} from './models/scripted-model.js';
export { ScriptedImageModel, TINY_PNG_BASE64 } from './models/image.js';
export type { ImageScript } from './models/image.js';
export { ReplayModel } from './models/replay-model.js';
export type { ReplayModelOptions } from './models/replay-model.js';
