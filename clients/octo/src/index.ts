// Octo's remote state on Hegemony State: the API client, the uploader and the state provider.

export { AppStateClient, backoffMs, retryAfterMs } from './client.js';
export type { ClientOptions, Files, LockOptions, RetryPolicy } from './client.js';
export { NoStateError, OctoApiError, UnarchivedJournalError } from './errors.js';
export { OctoStateProvider } from './state-provider.js';
export type { StateProviderOptions } from './state-provider.js';
export { sha256, Uploader } from './uploader.js';
export type { FileSource, UploaderOptions } from './uploader.js';
export type * from './types.js';
