// Paths of the single-page application, in the address bar (the server answers every path
// outside /api with index.html). `navigate` changes the path without a reload.

import { useEffect, useState } from 'preact/hooks';

const listeners = new Set<() => void>();

export function navigate(to: string, replace = false): void {
  if (replace) history.replaceState(null, '', to);
  else history.pushState(null, '', to);
  listeners.forEach((l) => l());
}

/** The current location (path and query), re-rendered on every change. */
export function useLocation(): URL {
  const [href, setHref] = useState(location.href);
  useEffect(() => {
    const update = () => setHref(location.href);
    listeners.add(update);
    window.addEventListener('popstate', update);
    return () => {
      listeners.delete(update);
      window.removeEventListener('popstate', update);
    };
  }, []);
  return new URL(href);
}

/** The page a path names. */
export type Page =
  | { page: 'sign-in' }
  | { page: 'overview' }
  | { page: 'states' }
  | { page: 'resources' }
  | { page: 'conflicts' }
  | { page: 'state'; name: string }
  | { page: 'import' }
  | { page: 'audit' }
  | { page: 'permissions' }
  | { page: 'deleted' }
  | { page: 'trust-policies' }
  | { page: 'apps' }
  | { page: 'app'; name: string }
  | { page: 'archive'; name: string; commitId: string }
  | { page: 'missing' };

export function pageOf(path: string): Page {
  // The org's overview is where signing in lands; the list of states has its own address.
  if (path === '/') return { page: 'overview' };
  if (path === '/states' || path === '/states/') return { page: 'states' };
  if (path === '/resources' || path === '/resources/') return { page: 'resources' };
  if (path === '/resources/conflicts') return { page: 'conflicts' };
  if (path === '/sign-in') return { page: 'sign-in' };
  if (path === '/import') return { page: 'import' };
  if (path === '/audit') return { page: 'audit' };
  if (path === '/permissions') return { page: 'permissions' };
  if (path === '/deleted-states') return { page: 'deleted' };
  if (path === '/trust-policies') return { page: 'trust-policies' };
  if (path === '/apps' || path === '/apps/') return { page: 'apps' };
  const app = /^\/apps\/([^/]+)(?:\/archives\/([^/]+))?$/.exec(path);
  if (app) {
    try {
      const name = decodeURIComponent(app[1]);
      return app[2] === undefined ? { page: 'app', name } : { page: 'archive', name, commitId: decodeURIComponent(app[2]) };
    } catch {
      return { page: 'missing' };
    }
  }
  const state = /^\/states\/([^/]+)$/.exec(path);
  if (state) {
    // A mistyped address (`%E0`, a lone `%`) is a missing page, not an exception that
    // leaves the application blank.
    try {
      return { page: 'state', name: decodeURIComponent(state[1]) };
    } catch {
      return { page: 'missing' };
    }
  }
  return { page: 'missing' };
}
