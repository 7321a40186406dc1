/**
 * Fetching a URL that a model (or anything it read) chose, without server-side request forgery:
 * `publicFetch` fetches only `https` URLs (unless `allowHttp`) of hosts that resolve to public
 * addresses (unless `allowPrivateNetwork`), optionally only hosts on an allow-list, follows at
 * most `maxRedirects` redirects itself and applies the same rules to every hop. The address is
 * checked inside the connection's own DNS lookup, so the address checked is the address
 * connected to: a name that resolves to a public address for the check and to a private one for
 * the connection (DNS rebinding) cannot slip through.
 */
import { lookup as systemLookup } from 'node:dns';
import type { LookupAddress } from 'node:dns';
import type { IncomingMessage } from 'node:http';
import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import type { LookupFunction } from 'node:net';
import { BlockList, isIP } from 'node:net';
import { Readable } from 'node:stream';
import { ArgumentError } from '../errors.js';

/** Resolves a host name to all its addresses. */
type ResolveHost = (hostname: string) => Promise<readonly LookupAddress[]>;

export interface NetworkPolicyOptions {
  /** Also fetch plain `http:` URLs (default: `https:` only). */
  allowHttp?: boolean;
  /**
   * Also fetch from non-public addresses (loopback, private, link-local, …): `true` for any,
   * or a list of CIDR ranges (`['10.20.0.0/16']`) for only those. Default: public addresses only.
   */
  allowPrivateNetwork?: boolean | readonly string[];
  /** When given, only these hosts are fetched (exact names, or `*.example.com` for subdomains). */
  allowHosts?: readonly string[];
  /** Redirects followed, each checked like the first URL (default 3; 0 refuses every redirect). */
  maxRedirects?: number;
  /** Replaces the system resolver (`dns.lookup`), e.g. to map test host names to local addresses. */
  resolveHost?: ResolveHost;
}

/** A URL or an address the policy refuses; `message` is for logs, never for the model. */
export class UrlRefused extends Error {
  override readonly name = 'UrlRefused';
}

/** What a fetch returns here: enough of `Response` to read a capped body. */
export interface FetchedResponse {
  status: number;
  headers: Headers;
  body: ReadableStream<Uint8Array> | null;
  arrayBuffer(): Promise<ArrayBuffer>;
}

/** One hop: `fetch` semantics without following redirects. */
export type HopFetch = (
  url: string,
  init: { signal: AbortSignal; redirect: 'manual' },
) => Promise<FetchedResponse>;

/** Ranges that are not the public internet (IANA special-purpose registries, IPv4 and IPv6). */
const NON_PUBLIC: readonly [string, number, 'ipv4' | 'ipv6'][] = [
  ['0.0.0.0', 8, 'ipv4'], // "this network", unspecified
  ['10.0.0.0', 8, 'ipv4'],
  ['100.64.0.0', 10, 'ipv4'], // carrier-grade NAT
  ['127.0.0.0', 8, 'ipv4'],
  ['169.254.0.0', 16, 'ipv4'], // link-local, cloud metadata
  ['172.16.0.0', 12, 'ipv4'],
  ['192.0.0.0', 24, 'ipv4'],
  ['192.0.2.0', 24, 'ipv4'],
  ['192.88.99.0', 24, 'ipv4'], // 6to4 relay anycast
  ['192.168.0.0', 16, 'ipv4'],
  ['198.18.0.0', 15, 'ipv4'],
  ['198.51.100.0', 24, 'ipv4'],
  ['203.0.113.0', 24, 'ipv4'],
  ['224.0.0.0', 4, 'ipv4'], // multicast
  ['240.0.0.0', 4, 'ipv4'], // reserved, broadcast
  ['::', 128, 'ipv6'], // unspecified
  ['::1', 128, 'ipv6'],
  ['::', 96, 'ipv6'], // IPv4-compatible (deprecated)
  ['::ffff:0:0:0', 96, 'ipv6'], // IPv4-translated (SIIT, RFC 2765): ::ffff:0:a.b.c.d
  ['64:ff9b:1::', 48, 'ipv6'], // local-use NAT64
  ['100::', 64, 'ipv6'], // discard
  ['2001::', 32, 'ipv6'], // Teredo (embeds an obfuscated IPv4 address)
  ['2001:db8::', 32, 'ipv6'],
  ['fc00::', 7, 'ipv6'], // unique local
  ['fe80::', 10, 'ipv6'], // link-local
  ['fec0::', 10, 'ipv6'], // site-local (deprecated)
  ['ff00::', 8, 'ipv6'], // multicast
];

const nonPublic = new BlockList();
for (const [network, prefix, type] of NON_PUBLIC) nonPublic.addSubnet(network, prefix, type);

/** The 16 bytes of an IPv6 address (zone id dropped), or null when it is not one. */
function ipv6Bytes(address: string): number[] | null {
  const text = address.replace(/%.*$/, '');
  if (isIP(text) !== 6) return null;
  const [head = '', tail] = text.split('::') as [string, string | undefined];
  const groups = (part: string) => {
    if (part === '') return [];
    const words = part.split(':');
    const last = words[words.length - 1]!;
    if (last.includes('.')) {
      const [a, b, c, d] = last.split('.').map(Number) as [number, number, number, number];
      words.splice(-1, 1, ((a << 8) | b).toString(16), ((c << 8) | d).toString(16));
    }
    return words.map((word) => parseInt(word, 16));
  };
  const front = groups(head);
  const back = tail === undefined ? [] : groups(tail);
  const words = [...front, ...Array<number>(8 - front.length - back.length).fill(0), ...back];
  return words.flatMap((word) => [word >> 8, word & 0xff]);
}

/** The IPv4 address an IPv6 address carries (mapped, NAT64 well-known prefix, 6to4), if any. */
function embeddedIPv4(address: string): string | null {
  const bytes = ipv6Bytes(address);
  if (!bytes) return null;
  const zero = (from: number, to: number) => bytes.slice(from, to).every((b) => b === 0);
  const v4 = (at: number) => bytes.slice(at, at + 4).join('.');
  if (zero(0, 10) && bytes[10] === 0xff && bytes[11] === 0xff) return v4(12); // ::ffff:a.b.c.d
  if (bytes[0] === 0 && bytes[1] === 0x64 && bytes[2] === 0xff && bytes[3] === 0x9b && zero(4, 12))
    return v4(12);
  if (bytes[0] === 0x20 && bytes[1] === 0x02) return v4(2); // 2002:aabb:ccdd::/48
  return null;
}

/** Whether an address is on the public internet (IPv4-in-IPv6 forms judged by their IPv4 address). */
export function isPublicAddress(address: string): boolean {
  const family = isIP(address.replace(/%.*$/, ''));
  if (family === 0) return false;
  if (family === 4) return !nonPublic.check(address, 'ipv4');
  const embedded = embeddedIPv4(address);
  if (embedded !== null) return !nonPublic.check(embedded, 'ipv4');
  return !nonPublic.check(address.replace(/%.*$/, ''), 'ipv6');
}

export interface NetworkPolicy {
  allowHttp: boolean;
  /** null: every address; otherwise the non-public ranges that are allowed besides public ones. */
  privateAllowed: BlockList | null;
  allowHosts: readonly string[] | null;
  maxRedirects: number;
  resolveHost: ResolveHost;
}

const systemResolve: ResolveHost = (hostname) =>
  new Promise((resolve, reject) =>
    systemLookup(hostname, { all: true, verbatim: true }, (error, addresses) =>
      error ? reject(error) : resolve(addresses),
    ),
  );

function cidrList(ranges: readonly string[]): BlockList {
  const list = new BlockList();
  for (const range of ranges) {
    const [network = '', prefix] = typeof range === 'string' ? range.split('/') : [];
    const family = isIP(network);
    const bits = Number(prefix ?? (family === 4 ? 32 : 128));
    if (family === 0 || !Number.isInteger(bits) || bits < 0 || bits > (family === 4 ? 32 : 128))
      throw new ArgumentError(`allowPrivateNetwork: not a CIDR range: ${String(range)}`);
    list.addSubnet(network, bits, family === 4 ? 'ipv4' : 'ipv6');
  }
  return list;
}

/** The network options out of a tool's options (for a factory that passes the rest on). */
export function networkOptionsOf(options: NetworkPolicyOptions): NetworkPolicyOptions {
  const { allowHttp, allowPrivateNetwork, allowHosts, maxRedirects, resolveHost } = options;
  return Object.fromEntries(
    Object.entries({ allowHttp, allowPrivateNetwork, allowHosts, maxRedirects, resolveHost }).filter(
      ([, value]) => value !== undefined,
    ),
  ) as NetworkPolicyOptions;
}

/** Validates the options (ArgumentError on a bad one) and fixes the defaults. */
export function networkPolicy(options: NetworkPolicyOptions = {}): NetworkPolicy {
  const {
    allowHttp = false,
    allowPrivateNetwork = false,
    allowHosts,
    maxRedirects = 3,
    resolveHost,
  } = options;
  if (typeof allowHttp !== 'boolean') throw new ArgumentError('allowHttp must be a boolean');
  if (typeof allowPrivateNetwork !== 'boolean' && !Array.isArray(allowPrivateNetwork))
    throw new ArgumentError('allowPrivateNetwork must be a boolean or a list of CIDR ranges');
  if (
    allowHosts !== undefined &&
    (!Array.isArray(allowHosts) || allowHosts.some((h) => typeof h !== 'string' || h === ''))
  )
    throw new ArgumentError('allowHosts must be a list of host names');
  if (!Number.isInteger(maxRedirects) || maxRedirects < 0 || maxRedirects > 20)
    throw new ArgumentError('maxRedirects must be an integer from 0 to 20');
  if (resolveHost !== undefined && typeof resolveHost !== 'function')
    throw new ArgumentError('resolveHost must be a function');
  return {
    allowHttp,
    privateAllowed:
      allowPrivateNetwork === true
        ? null
        : cidrList(allowPrivateNetwork === false ? [] : allowPrivateNetwork),
    allowHosts: allowHosts ? allowHosts.map((host) => host.toLowerCase().replace(/^\[|\]$/g, '')) : null,
    maxRedirects,
    resolveHost: resolveHost ?? systemResolve,
  };
}

function addressAllowed(address: string, policy: NetworkPolicy): boolean {
  if (policy.privateAllowed === null || isPublicAddress(address)) return true;
  const plain = address.replace(/%.*$/, '');
  return policy.privateAllowed.check(plain, isIP(plain) === 4 ? 'ipv4' : 'ipv6');
}

/** The URL's host without IPv6 brackets or a trailing dot, lower case. */
const hostOf = (url: URL) =>
  url.hostname
    .toLowerCase()
    .replace(/^\[|\]$/g, '')
    .replace(/\.$/, '');

/** The checks that need no network: scheme, credentials, allow-list, a literal address. */
function checkUrl(url: URL, policy: NetworkPolicy): void {
  if (url.protocol !== 'https:' && !(policy.allowHttp && url.protocol === 'http:'))
    throw new UrlRefused(`scheme ${url.protocol} is not allowed`);
  if (url.username || url.password) throw new UrlRefused('URLs with credentials are not fetched');
  const host = hostOf(url);
  if (
    policy.allowHosts &&
    !policy.allowHosts.some((allowed) =>
      allowed.startsWith('*.') ? host.endsWith(allowed.slice(1)) : host === allowed,
    )
  )
    throw new UrlRefused(`host ${host} is not on the allow-list`);
  if (isIP(host) !== 0 && !addressAllowed(host, policy))
    throw new UrlRefused(`address ${host} is not public`);
}

/**
 * Checks a URL that something else will fetch (a provider SDK): scheme, allow-list and every
 * address its host resolves to. UrlRefused when the policy refuses it. Weaker than
 * `publicFetch`, which also checks the address it connects to and each redirect.
 */
export async function checkPublicUrl(url: string, policy: NetworkPolicy): Promise<void> {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new UrlRefused('not a URL');
  }
  checkUrl(parsed, policy);
  if (isIP(hostOf(parsed)) === 0) await resolveChecked(hostOf(parsed), policy);
}

/** Resolves a name and refuses it when any of its addresses is not allowed. */
async function resolveChecked(hostname: string, policy: NetworkPolicy): Promise<readonly LookupAddress[]> {
  const addresses = await policy.resolveHost(hostname);
  if (addresses.length === 0) throw new UrlRefused(`${hostname} did not resolve`);
  const refused = addresses.find((entry) => !addressAllowed(entry.address, policy));
  if (refused) throw new UrlRefused(`${hostname} resolves to ${refused.address}, which is not public`);
  return addresses;
}

/** The connection's lookup: resolve, check, and hand the socket only the checked addresses. */
function checkedLookup(policy: NetworkPolicy): LookupFunction {
  return (hostname, options, callback) => {
    resolveChecked(hostname, policy).then(
      (addresses) => {
        const wanted = options.family === 4 || options.family === 6 ? options.family : 0;
        const usable = addresses.filter((entry) => wanted === 0 || entry.family === wanted);
        if (usable.length === 0) {
          callback(new UrlRefused(`${hostname} has no IPv${wanted} address`), '', 0);
        } else if (options.all) {
          (callback as unknown as (error: null, addresses: LookupAddress[]) => void)(null, [...usable]);
        } else callback(null, usable[0]!.address, usable[0]!.family);
      },
      (error: Error) => callback(error as NodeJS.ErrnoException, '', 0),
    );
  };
}

function toResponse(message: IncomingMessage): FetchedResponse {
  const headers = new Headers();
  for (const [name, value] of Object.entries(message.headers)) {
    if (value !== undefined) headers.set(name, Array.isArray(value) ? value.join(', ') : value);
  }
  const body = Readable.toWeb(message) as ReadableStream<Uint8Array>;
  return {
    status: message.statusCode ?? 0,
    headers,
    body,
    arrayBuffer: () => new Response(body).arrayBuffer(),
  };
}

/** One GET with no redirects, no connection reuse, and the address checked at connect time. */
function directFetch(policy: NetworkPolicy): HopFetch {
  return (url, { signal }) =>
    new Promise<FetchedResponse>((resolve, reject) => {
      const target = new URL(url);
      const request = (target.protocol === 'https:' ? httpsRequest : httpRequest)(
        target,
        { method: 'GET', agent: false, lookup: checkedLookup(policy), signal },
        (message) => resolve(toResponse(message)),
      );
      request.on('error', reject);
      request.end();
    });
}

const REDIRECTS = new Set([301, 302, 303, 307, 308]);

/**
 * GETs `url` under the policy, following redirects itself. Throws UrlRefused when the policy
 * refuses a hop, and the transport's error when a fetch fails. With `fetchHop` (a proxy, a
 * custom transport) every hop's URL and resolved addresses are checked before it is handed
 * over; only the built-in transport also checks the address it connects to.
 */
export async function publicFetch(
  url: string,
  options: { policy: NetworkPolicy; signal: AbortSignal; fetchHop?: HopFetch },
): Promise<FetchedResponse> {
  const { policy, signal } = options;
  const hop = options.fetchHop ?? directFetch(policy);
  let current: URL;
  try {
    current = new URL(url);
  } catch {
    throw new UrlRefused('not a URL');
  }
  for (let redirects = 0; ; redirects++) {
    // A custom transport connects itself: its hops are checked by name beforehand.
    if (options.fetchHop) await checkPublicUrl(current.href, policy);
    else checkUrl(current, policy);
    const response = await hop(current.href, { signal, redirect: 'manual' });
    const location = response.headers.get('location');
    if (!REDIRECTS.has(response.status) || location === null) return response;
    await response.body?.cancel().catch(() => undefined);
    if (redirects >= policy.maxRedirects) throw new UrlRefused(`more than ${policy.maxRedirects} redirects`);
    try {
      current = new URL(location, current);
    } catch {
      throw new UrlRefused('a redirect to something that is not a URL');
    }
  }
}

/**
 * A response's body, read only up to one byte past `maxBytes` (a server that lies about its
 * size, or sends none, cannot fill memory); `tooLarge` builds the error for a bigger body.
 */
export async function readCapped(
  response: FetchedResponse,
  maxBytes: number,
  tooLarge: () => Error,
): Promise<Uint8Array> {
  const length = Number(response.headers.get('content-length') ?? NaN);
  if (Number.isFinite(length) && length > maxBytes) {
    await response.body?.cancel().catch(() => undefined);
    throw tooLarge();
  }
  if (!response.body) {
    const bytes = new Uint8Array(await response.arrayBuffer());
    if (bytes.byteLength > maxBytes) throw tooLarge();
    return bytes;
  }
  const reader = response.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > maxBytes) {
      await reader.cancel().catch(() => undefined);
      throw tooLarge();
    }
    chunks.push(value);
  }
  return new Uint8Array(Buffer.concat(chunks));
}
