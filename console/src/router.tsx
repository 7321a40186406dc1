/**
 * Hash routing over a route table: a view is one entry in `routes.ts` (a pattern, a title, a
 * component and, optionally, a place in the navigation). Adding a view adds an entry.
 */
import type { ComponentType } from 'react';
import { useEffect, useState } from 'react';

export interface RouteParams {
  /** The pattern's `:name` segments. */
  params: Record<string, string>;
  /** The hash's query string (`#/turns?agent=x`). */
  query: URLSearchParams;
}

export interface ViewRoute {
  /** `/turns/:id`: literal segments and `:name` parameters. */
  path: string;
  title: string;
  view: ComponentType<RouteParams>;
  /** Shown in the navigation, in table order, under this label. */
  nav?: string;
}

export interface Location {
  path: string;
  query: URLSearchParams;
}

function current(): Location {
  const hash = window.location.hash.replace(/^#/, '') || '/';
  const [path = '/', query = ''] = hash.split('?');
  return { path, query: new URLSearchParams(query) };
}

export function useLocation(): Location {
  const [location, setLocation] = useState(current);
  useEffect(() => {
    const onChange = () => setLocation(current());
    window.addEventListener('hashchange', onChange);
    return () => window.removeEventListener('hashchange', onChange);
  }, []);
  return location;
}

export function match(
  routes: readonly ViewRoute[],
  path: string,
): { route: ViewRoute; params: Record<string, string> } | null {
  const segments = path.split('/').filter(Boolean);
  for (const route of routes) {
    const pattern = route.path.split('/').filter(Boolean);
    if (pattern.length !== segments.length) continue;
    const params: Record<string, string> = {};
    const ok = pattern.every((part, i) => {
      const segment = segments[i]!;
      if (part.startsWith(':')) {
        params[part.slice(1)] = decodeURIComponent(segment);
        return true;
      }
      return part === segment;
    });
    if (ok) return { route, params };
  }
  return null;
}

/** The href of a route: `href('/turns/:id', { id })`, with an optional query. */
export function href(path: string, params: Record<string, string> = {}, query?: URLSearchParams): string {
  const filled = path.replace(/:([a-zA-Z]+)/g, (_, name: string) => encodeURIComponent(params[name] ?? ''));
  const search = query && [...query.keys()].length > 0 ? `?${query}` : '';
  return `#${filled}${search}`;
}

export function navigate(to: string): void {
  window.location.hash = to.replace(/^#/, '');
}
