/**
 * The reference images and mask of an image request: each one checked as the model gave it
 * (before the gate) and fetched into `data:` content (after it), so the provider never sees a URL.
 */
import { ToolError, ToolValidationError } from '../errors.js';
import { baseMimeType, IMAGE_MIME_TYPES, mediaPart } from '../models/media.js';
import { heartbeating } from './heartbeating.js';
import type { FetchedResponse, NetworkPolicy } from './public-fetch.js';
import { checkPublicUrl, readCapped, UrlRefused } from './public-fetch.js';
import type { ToolContext } from './tool.js';

/** What the model reads for any reference image or mask URL refused or failed: no status, no address. */
const UNUSABLE_URL = 'a reference image or mask URL could not be used (only public https URLs are fetched)';

// eslint-disable-next-line no-control-regex -- matching control characters is the point
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;

/**
 * One reference image or mask as the model gave it: a base64 `data:` URL of an image type
 * (normalized), or a URL `checkPublicUrl` accepts (to be fetched here, never by the provider).
 * Anything else, control characters included (the URL parser drops tabs and newlines that a
 * provider SDK's own "is this a URL" test would not), is a ToolValidationError.
 */
export async function checkedReference(
  reference: string,
  policy: NetworkPolicy,
  maxBytes: number,
  context: ToolContext,
): Promise<{ data: string } | { url: string }> {
  if (CONTROL.test(reference))
    throw new ToolValidationError('a reference image or mask contains control characters');
  if (/^data:/i.test(reference)) {
    const part = mediaPart({ url: reference }, (message) => new ToolValidationError(message), {
      maxBytes,
      mimeTypes: IMAGE_MIME_TYPES,
    });
    return { data: `data:${part.mime_type};base64,${part.data ?? ''}` };
  }
  if (!/^https?:\/\//i.test(reference))
    throw new ToolValidationError('a reference image or mask must be an https URL or a base64 data: URL');
  try {
    await checkPublicUrl(reference, policy);
  } catch (error) {
    await context.emit('image.failed', {
      url: reference,
      error: error instanceof Error ? error.message : String(error),
      refused: true,
    });
    throw new ToolError(UNUSABLE_URL);
  }
  return { url: reference };
}

/**
 * Fetches one checked reference URL through `publicFetch` (every hop checked, the address
 * connected to checked) and returns it as a `data:` URL: the provider never sees a URL.
 */
async function fetchedReference(
  url: string,
  fetcher: (url: string, signal: AbortSignal) => Promise<FetchedResponse>,
  maxBytes: number,
  context: ToolContext,
): Promise<string> {
  let bytes: Uint8Array;
  let mimeType: string;
  try {
    const response = await fetcher(url, context.signal);
    mimeType = baseMimeType(response.headers.get('content-type') ?? '');
    if (response.status !== 200 || !(IMAGE_MIME_TYPES as readonly string[]).includes(mimeType)) {
      await response.body?.cancel().catch(() => undefined);
      throw new Error(`answered ${response.status} with ${mimeType || 'no content type'}`);
    }
    bytes = await readCapped(response, maxBytes, () => new Error(`larger than ${maxBytes} bytes`));
  } catch (error) {
    if (context.signal.aborted) throw error;
    // The reason stays in the turn's event log, for the operator: the model only learns "no".
    await context.emit('image.failed', {
      url,
      error: error instanceof Error ? error.message : String(error),
      refused: error instanceof UrlRefused,
    });
    throw new ToolError(UNUSABLE_URL);
  }
  return `data:${mimeType};base64,${Buffer.from(bytes).toString('base64')}`;
}

/** Every reference and the mask as `data:` content, fetched once the gate approved. */
export async function inlineReferences(
  references: ({ data: string } | { url: string })[],
  fetcher: (url: string, signal: AbortSignal) => Promise<FetchedResponse>,
  maxBytes: number,
  context: ToolContext,
): Promise<string[]> {
  return heartbeating(context, async () => {
    const contents: string[] = [];
    for (const reference of references)
      contents.push(
        'data' in reference
          ? reference.data
          : await fetchedReference(reference.url, fetcher, maxBytes, context),
      );
    return contents;
  });
}
