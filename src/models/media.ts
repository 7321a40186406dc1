/**
 * Media the model reads (spec §3.9): images and files in a user's input or handed to
 * `view_media`. They are stored as `image` / `file` content parts and reach the provider as
 * real AI SDK image or file parts, never as text. Checked before anything is stored or sent:
 * an unsupported MIME type or an oversized file is an error of the caller's kind.
 */
import type { ContentPart } from '../store/types.js';

/** One image or file: inline bytes (base64 or Uint8Array), a data URL, or an https URL. */
export interface MediaInput {
  /** `https://…`, `http://…` or `data:<mime>;base64,…`. */
  url?: string;
  /** The bytes, base64 or raw. */
  data?: string | Uint8Array;
  /** IANA media type; taken from a data URL when omitted there. */
  mimeType?: string;
  filename?: string;
}

/** Media as a provider-neutral model message carries it. */
export interface ModelMedia {
  kind: 'image' | 'file';
  mediaType: string;
  /** Base64 bytes. */
  data?: string;
  url?: string;
  filename?: string;
}

export const IMAGE_MIME_TYPES = ['image/png', 'image/jpeg', 'image/gif', 'image/webp'] as const;
export const FILE_MIME_TYPES = [
  'application/pdf',
  'text/plain',
  'text/markdown',
  'text/csv',
  'application/json',
] as const;
/** Largest decoded media accepted, in bytes. */
export const MEDIA_MAX_BYTES = 20 * 1024 * 1024;

export type MediaPart = Extract<ContentPart, { type: 'image' } | { type: 'file' }>;

export interface MediaLimits {
  maxBytes?: number;
  mimeTypes?: readonly string[];
}

const DATA_URL = /^data:([\w.+-]+\/[\w.+-]+)?(?:;[\w-]+=[^;,]*)*;base64,([A-Za-z0-9+/=\s]*)$/;

/** The media type without parameters, lower-cased. */
export function baseMimeType(type: string): string {
  return type.split(';')[0]!.trim().toLowerCase();
}

export const decodedSize = (base64: string) => Math.floor((base64.replace(/[\s=]/g, '').length * 3) / 4);

/**
 * Checks one input and returns its stored part (`image` for image types, `file` otherwise).
 * `fail` builds the error: an InputError for run input, a ToolError inside a tool.
 */
export function mediaPart(
  input: MediaInput,
  fail: (message: string) => Error,
  limits: MediaLimits = {},
): MediaPart {
  if (!input || typeof input !== 'object') throw fail('media must be an object with a url or data');
  const maxBytes = limits.maxBytes ?? MEDIA_MAX_BYTES;
  const allowed = limits.mimeTypes ?? [...IMAGE_MIME_TYPES, ...FILE_MIME_TYPES];
  let data: string | undefined;
  let url: string | undefined;
  let mimeType = input.mimeType;
  if (input.data !== undefined) {
    data =
      typeof input.data === 'string'
        ? input.data.replace(/\s/g, '')
        : Buffer.from(input.data).toString('base64');
    if (!/^[A-Za-z0-9+/]*={0,2}$/.test(data)) throw fail('media data must be base64');
  } else if (typeof input.url === 'string') {
    const match = DATA_URL.exec(input.url);
    if (match) {
      mimeType ??= match[1];
      data = match[2]!.replace(/\s/g, '');
    } else if (/^https?:\/\/[^\s]+$/i.test(input.url)) url = input.url;
    else throw fail(`media url must be http(s) or a base64 data URL: ${input.url.slice(0, 80)}`);
  } else {
    throw fail('media needs a url or data');
  }
  if (typeof mimeType !== 'string' || mimeType === '') throw fail('media needs a mimeType');
  const type = baseMimeType(mimeType);
  if (!allowed.includes(type)) {
    throw fail(`unsupported media type ${type} (supported: ${allowed.join(', ')})`);
  }
  if (data !== undefined && decodedSize(data) > maxBytes) {
    throw fail(`media is larger than ${maxBytes} bytes`);
  }
  const filename = typeof input.filename === 'string' && input.filename !== '' ? input.filename : undefined;
  const kind = (IMAGE_MIME_TYPES as readonly string[]).includes(type) ? 'image' : 'file';
  return {
    type: kind,
    mime_type: type,
    ...(url ? { url } : {}),
    ...(data !== undefined ? { data } : {}),
    ...(filename ? { filename } : {}),
  } as MediaPart;
}

/** A stored image or file part as model media; null for other parts or one with no content. */
export function modelMediaOf(part: ContentPart): ModelMedia | null {
  if (part.type !== 'image' && part.type !== 'file') return null;
  if (!part.data && !part.url) return null;
  return {
    kind: part.type,
    mediaType: part.mime_type,
    ...(part.data ? { data: part.data } : {}),
    ...(part.url ? { url: part.url } : {}),
    ...('filename' in part && part.filename ? { filename: part.filename } : {}),
  };
}
