/**
 * Finding 2 (issue 28): `view_media` fetches a URL the model chose. A prompt-injected model
 * must not reach loopback, private or metadata addresses, directly, through a redirect, or
 * through a name that resolves there; and the text it reads back must not be an oracle.
 * Two local HTTP servers count every request they receive: "secret" (127.0.0.1) plays the
 * internal service, "cdn" (127.0.0.2, Linux routes all of 127/8 to loopback) plays a public
 * host that the tests name `cdn.example.com` through the tool's resolver option.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createServer } from 'node:http';
import type { LookupAddress } from 'node:dns';
import type { AddressInfo } from 'node:net';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { isPublicAddress } from '../../src/agents/public-fetch.js';
import type { ViewMediaToolOptions } from '../../src/agents/view-media-tool.js';
import { viewMediaTool } from '../../src/agents/view-media-tool.js';
import { ToolError, ToolValidationError } from '../../src/errors.js';
import type { JsonObject } from '../../src/store/types.js';
import { ScriptedImageModel, TINY_PNG_BASE64 } from '../../src/models/image.js';
import { paintImageTool } from '../../src/specialists/painter.js';
import { ScriptedModel } from '../../src/models/scripted-model.js';
import { SqliteStore } from '../../src/store/sqlite-store.js';
import { call, emitted, toolContext } from '../specialists/context.js';

/** What the model reads for any refused or failed reference image or mask URL. */
const UNUSABLE = 'a reference image or mask URL could not be used (only public https URLs are fetched)';

const requests = { secret: [] as string[], cdn: [] as string[] };
const secret = createServer((req: IncomingMessage, res: ServerResponse) => {
  requests.secret.push(req.url ?? '');
  res.writeHead(200, { 'content-type': 'text/plain' });
  res.end('AWS_SECRET_ACCESS_KEY=do-not-leak');
});
const cdn = createServer((req: IncomingMessage, res: ServerResponse) => {
  const url = new URL(req.url ?? '/', 'http://cdn.example.com');
  requests.cdn.push(url.pathname);
  const to = url.searchParams.get('to');
  if (to) {
    res.writeHead(302, { location: to });
    return res.end();
  }
  if (url.pathname === '/loop') {
    res.writeHead(302, { location: '/loop' });
    return res.end();
  }
  if (url.pathname === '/cat.png') {
    res.writeHead(200, { 'content-type': 'image/png' });
    return res.end(Buffer.from(TINY_PNG_BASE64, 'base64'));
  }
  res.writeHead(403, { 'content-type': 'text/plain' });
  res.end('forbidden');
});

let secretPort = 0;
let cdnPort = 0;
let dir = '';
let store: SqliteStore;
const vision = new ScriptedModel({ '*': () => 'A small square.' });
const resolved: string[] = [];
/** `cdn.example.com` is the cdn server; any other name goes nowhere. */
const resolveHost = async (hostname: string): Promise<readonly LookupAddress[]> => {
  resolved.push(hostname);
  if (hostname === 'cdn.example.com') return [{ address: '127.0.0.2', family: 4 }];
  if (hostname === 'mixed.example.com')
    return [
      { address: '93.184.215.14', family: 4 },
      { address: '127.0.0.1', family: 4 },
    ];
  if (hostname === 'metadata.example.com') return [{ address: '::ffff:169.254.169.254', family: 6 }];
  throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' });
};

const tool = (options: Partial<ViewMediaToolOptions> = {}) =>
  viewMediaTool({ client: vision, model: 'vision-1', resolveHost, ...options });

/** Calls view_media on `media`; the ToolError text the model would read, or null on success. */
async function view(media: string, options: Partial<ViewMediaToolOptions> = {}): Promise<string | null> {
  try {
    await call(tool(options), { media, objective: 'Copy the text verbatim' }, await toolContext(store));
    return null;
  } catch (error) {
    expect(error).toBeInstanceOf(ToolError);
    return (error as Error).message;
  }
}

beforeAll(async () => {
  await new Promise<void>((resolve) => secret.listen(0, '127.0.0.1', resolve));
  await new Promise<void>((resolve) => cdn.listen(0, '127.0.0.2', resolve));
  secretPort = (secret.address() as AddressInfo).port;
  cdnPort = (cdn.address() as AddressInfo).port;
  dir = mkdtempSync(join(tmpdir(), 'tk-ssrf-'));
  store = await SqliteStore.open(join(dir, 'store.sqlite'));
});
afterAll(async () => {
  await store?.close();
  await new Promise<void>((resolve) => secret.close(() => resolve()));
  await new Promise<void>((resolve) => cdn.close(() => resolve()));
  rmSync(dir, { recursive: true, force: true });
});
beforeEach(() => {
  requests.secret.length = 0;
  requests.cdn.length = 0;
  resolved.length = 0;
  vision.calls.length = 0;
});

describe('view_media: no server-side request forgery', () => {
  it('security: loopback URLs the model names (127.0.0.1, localhost, [::ffff:127.0.0.1], 169.254.169.254) are refused by default and with http allowed; zero requests reach the server, the vision model is not called', async () => {
    const targets = [
      `http://127.0.0.1:${secretPort}/latest/meta-data`,
      `https://127.0.0.1:${secretPort}/`,
      `http://localhost:${secretPort}/`,
      `http://[::ffff:127.0.0.1]:${secretPort}/`,
      `http://[::1]:${secretPort}/`,
      `http://2130706433:${secretPort}/`,
      'http://169.254.169.254/latest/meta-data/iam/security-credentials/role',
    ];
    for (const options of [{}, { allowHttp: true }]) {
      for (const target of targets) {
        const text = await view(target, { ...options, resolveHost: undefined });
        expect(text).toBe('media URL could not be fetched (only public https URLs are fetched)');
      }
    }
    expect(requests.secret).toEqual([]);
    expect(vision.calls).toHaveLength(0);
  });

  it('security: a public-looking URL that redirects to loopback is refused at the redirect; the loopback server receives nothing', async () => {
    const open = { allowHttp: true, allowPrivateNetwork: ['127.0.0.2/32'] };
    const via = (to: string) => `http://cdn.example.com:${cdnPort}/go?to=${encodeURIComponent(to)}`;
    const targets = [
      `http://127.0.0.1:${secretPort}/latest/meta-data`,
      `http://localhost:${secretPort}/`,
      `http://[::ffff:127.0.0.1]:${secretPort}/`,
      `http://[64:ff9b::7f00:1]:${secretPort}/`,
    ];
    for (const target of targets) {
      expect(await view(via(target), open)).toBe(
        'media URL could not be fetched (only public https URLs are fetched)',
      );
    }
    expect(requests.cdn).toEqual(targets.map(() => '/go'));
    expect(requests.secret).toEqual([]);
    // The same redirect to an allowed place is followed: the refusals above are the address check.
    expect(await view(via(`http://cdn.example.com:${cdnPort}/cat.png`), open)).toBeNull();
    expect(requests.cdn.slice(-2)).toEqual(['/go', '/cat.png']);
    expect(vision.calls).toHaveLength(1);
  });

  it('security: a name resolving to a private address is refused at connect time, also when only one of its addresses is private (no second lookup to rebind)', async () => {
    const open = { allowHttp: true };
    const from = emitted.length;
    for (const name of ['mixed.example.com', 'metadata.example.com'])
      expect(await view(`http://${name}:${secretPort}/`, open)).toBe(
        'media URL could not be fetched (only public https URLs are fetched)',
      );
    expect(requests.secret).toEqual([]);
    // Refused by the address check (not merely a failed connection), for both names.
    expect(
      emitted
        .slice(from)
        .filter((event) => event.type === 'media.failed')
        .map((event) => [event.payload['refused'], event.payload['error']]),
    ).toEqual([
      [true, 'mixed.example.com resolves to 127.0.0.1, which is not public'],
      [true, 'metadata.example.com resolves to ::ffff:169.254.169.254, which is not public'],
    ]);
    // One resolution per connection: the address checked is the address connected to.
    expect(resolved).toEqual(['mixed.example.com', 'metadata.example.com']);
  });

  it('security: plain http is refused unless allowHttp; allowHosts refuses any other host, on every hop', async () => {
    const ok = `http://cdn.example.com:${cdnPort}/cat.png`;
    const wide = { allowPrivateNetwork: true };
    expect(await view(ok, wide)).not.toBeNull();
    expect(requests.cdn).toEqual([]);
    const listed = { ...wide, allowHttp: true, allowHosts: ['*.example.com'] };
    expect(await view(`http://127.0.0.1:${secretPort}/`, listed)).not.toBeNull();
    const bounce = `http://cdn.example.com:${cdnPort}/go?to=${encodeURIComponent(`http://127.0.0.1:${secretPort}/`)}`;
    expect(await view(bounce, listed)).not.toBeNull();
    expect(requests.secret).toEqual([]);
    expect(await view(ok, listed)).toBeNull();
    expect(requests.cdn).toEqual(['/go', '/cat.png']);
  });

  it('security: an error answer or a redirect loop gives the model no status and no URL; the detail goes to the event log', async () => {
    const open = { allowHttp: true, allowPrivateNetwork: ['127.0.0.2/32'], maxRedirects: 2 };
    const forbidden = `http://cdn.example.com:${cdnPort}/admin`;
    const text = await view(forbidden, open);
    expect(text).not.toMatch(/403|admin|cdn|127/);
    expect(await view(`http://cdn.example.com:${cdnPort}/loop`, open)).toBe(text);
    expect(requests.cdn).toEqual(['/admin', '/loop', '/loop', '/loop']);
    const failures = emitted.filter((event) => event.type === 'media.failed').slice(-2);
    expect(failures.map((event) => event.payload['error'])).toEqual([
      'answered 403',
      'more than 2 redirects',
    ]);
  });

  it('security: with a custom fetch (a proxy) every hop is still checked and redirects are followed here: a redirect to loopback never reaches the proxy', async () => {
    const hops: string[] = [];
    // The "proxy" sends cdn.example.com to the cdn server and anything else where it points.
    const proxy: ViewMediaToolOptions['fetch'] = (url, init) => {
      hops.push(url);
      return fetch(url.replace('cdn.example.com', '127.0.0.2'), init);
    };
    const open = { allowHttp: true, allowPrivateNetwork: ['127.0.0.2/32'], fetch: proxy };
    const bounce = `http://cdn.example.com:${cdnPort}/go?to=${encodeURIComponent(`http://127.0.0.1:${secretPort}/`)}`;
    expect(await view(bounce, open)).toBe(
      'media URL could not be fetched (only public https URLs are fetched)',
    );
    expect(hops).toEqual([bounce]);
    expect(requests.secret).toEqual([]);
    expect(await view(`http://cdn.example.com:${cdnPort}/cat.png`, open)).toBeNull();
    expect(() => tool({ fetch: 'nope' as never })).toThrow(/fetch must be a function/);
  });

  it('security: painter reference images and masks pointing at loopback, metadata or a private name are refused before the gate and the image model', async () => {
    let gated = 0;
    const imageModel = new ScriptedImageModel({ modelId: 'img-1' });
    const paint = paintImageTool({ imageModel, gate: () => (gated++, true), resolveHost });
    for (const args of <JsonObject[]>[
      { reference_images: [`http://127.0.0.1:${secretPort}/`] },
      { reference_images: ['https://169.254.169.254/latest/meta-data'] },
      { reference_images: ['data:image/png;base64,AAAA', 'https://metadata.example.com/x.png'] },
      { mask: 'https://[::ffff:10.0.0.1]/mask.png' },
    ]) {
      const error = await call(paint, { prompt: 'a cat', ...args }, await toolContext(store)).catch(
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(ToolError);
      expect((error as Error).message).toBe(UNUSABLE);
    }
    expect(gated).toBe(0);
    expect(imageModel.calls).toHaveLength(0);
    expect(requests.secret).toEqual([]);
  });

  it('security: image tools: a reference or mask with control characters ("http\\t://…", which a URL parser reads as http://) or in no accepted form is a ToolValidationError; nothing is resolved or fetched, the image model is not called', async () => {
    const imageModel = new ScriptedImageModel({ modelId: 'img-1' });
    const paint = paintImageTool({ imageModel, gate: () => true, resolveHost, allowHttp: true });
    for (const args of <JsonObject[]>[
      { reference_images: ['http\t://169.254.169.254.nip.io/latest/meta-data'] },
      { reference_images: [`http\n://127.0.0.1:${secretPort}/`] },
      { mask: `http\r://localhost:${secretPort}/mask.png` },
      { reference_images: [`httpx://127.0.0.1:${secretPort}/`] },
      { reference_images: [` http://127.0.0.1:${secretPort}/`] },
      { reference_images: ['data:text/plain;base64,AAAA'] },
    ]) {
      const error = await call(paint, { prompt: 'a cat', ...args }, await toolContext(store)).catch(
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(ToolValidationError);
    }
    expect(resolved).toEqual([]);
    expect(requests.secret).toEqual([]);
    expect(imageModel.calls).toHaveLength(0);
  });

  it('security: image tools fetch references themselves: a redirect to loopback and a name that rebinds to loopback after the check are refused, the local server receives nothing and the image model never gets a URL', async () => {
    const imageModel = new ScriptedImageModel({ modelId: 'img-1' });
    let lookups = 0;
    // Public for the check by name, loopback for the connection: DNS rebinding.
    const rebinding = async (hostname: string): Promise<readonly LookupAddress[]> =>
      hostname === 'rebind.example.com'
        ? [{ address: lookups++ === 0 ? '93.184.215.14' : '127.0.0.1', family: 4 }]
        : resolveHost(hostname);
    const open = { allowHttp: true, allowPrivateNetwork: ['127.0.0.2/32'], resolveHost: rebinding };
    const paint = paintImageTool({ imageModel, gate: () => true, ...open });
    const bounce = `http://cdn.example.com:${cdnPort}/go?to=${encodeURIComponent(`http://127.0.0.1:${secretPort}/`)}`;
    const from = emitted.length;
    for (const args of <JsonObject[]>[
      { reference_images: [bounce] },
      { mask: `http://rebind.example.com:${secretPort}/mask.png` },
    ]) {
      const error = await call(paint, { prompt: 'a cat', ...args }, await toolContext(store)).catch(
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(ToolError);
      expect((error as Error).message).toBe(UNUSABLE);
    }
    expect(requests.secret).toEqual([]);
    expect(requests.cdn).toEqual(['/go']);
    expect(lookups).toBe(2);
    expect(imageModel.calls).toHaveLength(0);
    expect(
      emitted
        .slice(from)
        .filter((event) => event.type === 'image.failed')
        .map((event) => event.payload['refused']),
    ).toEqual([true, true]);
    // An allowed image is fetched here and handed over as bytes: the image model sees no URL.
    await call(
      paint,
      { prompt: 'a cat', reference_images: [`http://cdn.example.com:${cdnPort}/cat.png`] },
      await toolContext(store),
    );
    expect(requests.cdn).toEqual(['/go', '/cat.png']);
    expect(imageModel.calls.map((request) => request.referenceImages)).toEqual([
      [`data:image/png;base64,${TINY_PNG_BASE64}`],
    ]);
  });

  it('security: the address classes: loopback, private, link-local, CGNAT, multicast, unspecified and IPv4 inside IPv6 (mapped, SIIT-translated, NAT64, 6to4) are not public', () => {
    const refused = [
      '127.0.0.1',
      '10.1.2.3',
      '172.16.0.1',
      '192.168.1.1',
      '169.254.169.254',
      '100.64.0.1',
      '0.0.0.0',
      '224.0.0.1',
      '255.255.255.255',
      '::',
      '::1',
      '::ffff:127.0.0.1',
      '::ffff:a9fe:a9fe',
      '64:ff9b::a9fe:a9fe',
      '2002:7f00:1::1',
      '2002:a00:1::',
      'fe80::1%eth0',
      'fc00::1',
      'fd12:3456::1',
      'ff02::1',
      '::127.0.0.1',
      '::ffff:0:127.0.0.1',
      '::ffff:0:a9fe:a9fe',
      'not-an-ip',
    ];
    const allowed = [
      '8.8.8.8',
      '93.184.215.14',
      '2606:4700:4700::1111',
      '::ffff:8.8.8.8',
      '64:ff9b::808:808',
      '2002:808:808::1',
    ];
    expect(refused.filter((address) => isPublicAddress(address))).toEqual([]);
    expect(allowed.filter((address) => !isPublicAddress(address))).toEqual([]);
  });
});
