// The API client: the token kept in sessionStorage (never localStorage, never a cookie),
// sent as a Bearer token to the same origin. A 401 from any call forgets the token and
// sends the person back to the sign-in page with the server's reason.

const TOKEN = 'hegemony-state.token';
const REASON = 'hegemony-state.signed-out-because';

export function currentToken(): string | null {
  return sessionStorage.getItem(TOKEN);
}

export function keepToken(token: string): void {
  sessionStorage.setItem(TOKEN, token);
}

/** Forgets the token; `reason` is shown on the sign-in page. */
export function forgetToken(reason?: string): void {
  sessionStorage.removeItem(TOKEN);
  if (reason) sessionStorage.setItem(REASON, reason);
  else sessionStorage.removeItem(REASON);
}

/** Why the last session ended, read once. */
export function takeSignOutReason(): string | null {
  const reason = sessionStorage.getItem(REASON);
  sessionStorage.removeItem(REASON);
  return reason;
}

/** A refusal from the API, with its code and the server's words. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

let onUnauthenticated: (reason: string) => void = () => {};

/** What the app does when a call answers 401: go back to the sign-in page. */
export function whenUnauthenticated(handler: (reason: string) => void): void {
  onUnauthenticated = handler;
}

/** The error a failed answer carries: `{"error": {"code", "message"}}`, or a lock document. */
export function errorOf(status: number, text: string): ApiError {
  try {
    const body = JSON.parse(text);
    if (body && body.error && typeof body.error.message === 'string') {
      return new ApiError(status, String(body.error.code ?? ''), body.error.message);
    }
    if (status === 423 && body && typeof body.ID === 'string') {
      const who = body.Who ? ` by ${body.Who}` : '';
      return new ApiError(status, 'locked', `the state is locked${who} (lock ID ${body.ID})`);
    }
  } catch {
    // Not JSON: fall through to the status alone.
  }
  return new ApiError(status, 'http_' + status, `the server answered ${status}`);
}

function refused(status: number, text: string): ApiError {
  const error = errorOf(status, text);
  if (status === 401) {
    forgetToken(error.message);
    onUnauthenticated(error.message);
  }
  return error;
}

function headers(extra: Record<string, string> = {}): Record<string, string> {
  const token = currentToken();
  return token ? { ...extra, Authorization: `Bearer ${token}` } : extra;
}

/**
 * Calls the API and reads its JSON answer (`undefined` for an empty one). `signal` cancels
 * the call (a search typed further makes the one before it useless): it then rejects with
 * the browser's `AbortError`, which the caller, having asked for it, ignores.
 */
export async function api<T>(method: string, path: string, body?: unknown, signal?: AbortSignal): Promise<T> {
  const init: RequestInit = { method, headers: headers(), signal };
  if (body !== undefined) {
    init.headers = headers({ 'Content-Type': 'application/json' });
    init.body = JSON.stringify(body);
  }
  const response = await fetch(path, init);
  const text = await response.text();
  if (!response.ok) throw refused(response.status, text);
  return (text ? JSON.parse(text) : undefined) as T;
}

/** A version's content as the server stores it, byte for byte. */
export async function fetchContent(path: string): Promise<Blob> {
  const response = await fetch(path, { headers: headers() });
  if (!response.ok) throw refused(response.status, await response.text());
  return response.blob();
}

/** Uploads `file` as the body of a POST, reporting progress; resolves with the JSON answer. */
export function upload<T>(path: string, file: Blob, progress: (sent: number, total: number) => void): Promise<T> {
  return new Promise((resolve, reject) => {
    const xhr = new XMLHttpRequest();
    xhr.open('POST', path);
    for (const [name, value] of Object.entries(headers({ 'Content-Type': 'application/json' }))) {
      xhr.setRequestHeader(name, value);
    }
    xhr.upload.onprogress = (e) => progress(e.loaded, e.lengthComputable ? e.total : file.size);
    xhr.onload = () => {
      if (xhr.status >= 200 && xhr.status < 300) {
        progress(file.size, file.size);
        resolve(JSON.parse(xhr.responseText) as T);
      } else {
        reject(refused(xhr.status, xhr.responseText));
      }
    };
    xhr.onerror = () => reject(new ApiError(0, 'network', 'the upload did not reach the server'));
    xhr.send(file);
  });
}

/** A path segment, encoded. */
export const seg = (s: string): string => encodeURIComponent(s);
