export type {
  ModelCallOptions,
  ModelClient,
  ModelMessage,
  ModelRequest,
  ModelResult,
  ModelToolSpec,
  ModelUsage,
  Thinking,
} from './types.js';
export { ScriptedModel, reply, toolCall } from './scripted-model.js';
export type {
  Script,
  ScriptedStep,
  ScriptedStepObject,
  ScriptedToolCall,
  ScriptFunction,
} from './scripted-model.js';
export { AiSdkModel, toModelError } from './ai-sdk-model.js';
export type { AiSdkModelOptions } from './ai-sdk-model.js';
export { createModelClient, modelClientFromEnv } from './providers.js';
export type { ProviderConfig } from './providers.js';
export { addUsage, costFromUsage } from './cost.js';
export type { Cost, CostConfig, CostRates } from './cost.js';
export { AiSdkImageModel, ScriptedImageModel, TINY_PNG_BASE64 } from './image.js';
export type {
  AiSdkImageModelOptions,
  GeneratedImage,
  ImageCallOptions,
  ImageModel,
  ImageRequest,
  ImageResult,
  ImageScript,
  ImageUsage,
} from './image.js';
