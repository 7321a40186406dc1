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
export { AiSdkModel, checkModelSpecification, toModelError } from './ai-sdk-model.js';
export type { AiSdkModelOptions } from './ai-sdk-model.js';
export { createModelClient, modelClientFromEnv } from './providers.js';
export type { ProviderConfig } from './providers.js';
export { addUsage, costFromUsage } from './cost.js';
export type { Cost, CostConfig, CostRates } from './cost.js';
export { AiSdkImageModel } from './image.js';
export type {
  AiSdkImageModelOptions,
  GeneratedImage,
  ImageCallOptions,
  ImageModel,
  ImageRequest,
  ImageResult,
  ImageUsage,
} from './image.js';
export { FILE_MIME_TYPES, IMAGE_MIME_TYPES, MEDIA_MAX_BYTES, mediaPart } from './media.js';
export type { MediaInput, MediaLimits, MediaPart, ModelMedia } from './media.js';
