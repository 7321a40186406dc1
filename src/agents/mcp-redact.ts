/**
 * Keeping an MCP server's credentials out of what the model, the store and Temporal history
 * see. A server is often started with a token in its arguments or reached at a URL with a key in
 * its query string, and its name and error messages end up in tool results, the manifest row
 * and (for replay-safe servers) activity failures. Redaction is a best effort on shapes that
 * carry secrets; a server whose arguments hold a secret in another shape should get a `name`.
 */
import { basename } from 'node:path';

const HIDDEN = '…';
/** Flags whose value is a secret: `--token x`, `--api-key=x`, `-p x` is not caught (name it). */
const SECRET_FLAG =
  /^--?[\w-]*(token|key|secret|passw(or)?d|pwd|auth|credential|bearer|cookie|session)[\w-]*$/i;
/** Vendor key prefixes, JWTs, and long mixed letter-digit strings. */
const KNOWN_TOKEN =
  /^((sk|pk|rk|ghp|gho|ghu|ghs|ghr|github_pat|glpat|xox[a-z])[-_]\w|(AKIA|ASIA)[A-Z0-9]{12}|AIza[\w-]{20}|ya29\.|eyJ[\w-]{8,}\.)/;

function tokenLike(word: string): boolean {
  if (KNOWN_TOKEN.test(word)) return true;
  return /^[A-Za-z0-9_+=-]{20,}$/.test(word) && /\d/.test(word) && /[A-Za-z]/.test(word);
}

/** A URL without userinfo, query or fragment, and with token-like path segments hidden. */
function redactUrl(value: string | URL): string {
  let url: URL;
  try {
    url = new URL(String(value));
  } catch {
    return HIDDEN;
  }
  const path = url.pathname
    .split('/')
    .map((segment) => (tokenLike(decodeURIComponent(segment)) ? HIDDEN : segment))
    .join('/');
  return `${url.protocol}//${url.host}${path === '/' ? '' : path}`;
}

function redactArg(arg: string, previous: string | undefined): string {
  if (previous !== undefined && SECRET_FLAG.test(previous)) return HIDDEN;
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(arg)) return redactUrl(arg);
  const assignment = /^(-{0,2}[\w.-]+)=/.exec(arg);
  if (assignment) return `${assignment[1]}=${HIDDEN}`;
  // A token, or an inline script or JSON document (which may hold anything).
  if (tokenLike(arg) || /\s/.test(arg)) return HIDDEN;
  // A path names the script by its file name (a home directory can name the user).
  if (/[/\\]/.test(arg) && !/^@[\w.-]+\/[\w.-]+$/.test(arg)) return basename(arg);
  return arg;
}

/** The default server name: the command's file name and its arguments, credentials hidden. */
export function defaultServerName(
  options: { stdio: { command: string; args?: string[] } } | { url: string | URL },
): string {
  if ('url' in options) return redactUrl(options.url);
  const args = options.stdio.args ?? [];
  const parts = [basename(options.stdio.command), ...args.map((arg, i) => redactArg(arg, args[i - 1]))];
  const name = parts.join(' ');
  return name.length > 120 ? `${name.slice(0, 119)}${HIDDEN}` : name;
}

/** An error message or a stderr tail with URL credentials, `key=value` secrets and tokens hidden. */
export function redactText(text: string): string {
  return text
    .replace(/\b[a-z][a-z0-9+.-]*:\/\/[^\s"'<>)]+/gi, (url) => redactUrl(url))
    .replace(/\b(bearer|basic)\s+[^\s"',]+/gi, `$1 ${HIDDEN}`)
    .replace(
      /\b([\w-]*(?:token|key|secret|passw(?:or)?d|pwd|auth|credential|cookie|session)[\w-]*)(["']?\s*[=:]\s*["']?)(?!bearer\b|basic\b)[^\s"',;&]+/gi,
      `$1$2${HIDDEN}`,
    )
    .replace(/[A-Za-z0-9_+/=.-]{20,}/g, (word) => (tokenLike(word) ? HIDDEN : word));
}
