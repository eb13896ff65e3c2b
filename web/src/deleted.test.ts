import { describe, expect, it } from 'vitest';

import { ApiError } from './api';
import { purgeRefusal, restoreBody, restoreRefusal } from './deleted';

describe('deleted states', () => {
  it('restores under the name it had with no body, under another with that name', () => {
    expect(restoreBody('network', 'network')).toBeUndefined();
    expect(restoreBody('network', 'network-old')).toEqual({ name: 'network-old' });
  });
  it('says a taken name in words, with the server’s message', () => {
    const taken = new ApiError(409, 'name_taken', 'state network exists');
    expect(restoreRefusal(taken, 'network')).toBe(
      'The name network is taken: a state has it now. Type a new name to restore it under (the server says: state network exists).',
    );
  });
  it('says a live lock, a refused name and a state no longer kept', () => {
    expect(restoreRefusal(new ApiError(423, 'locked', 'the state is locked by ada (lock ID 1)'), 'net')).toBe(
      'A lock on net is live, so it cannot be restored under that name now: the state is locked by ada (lock ID 1).',
    );
    expect(restoreRefusal(new ApiError(400, 'invalid_name', 'bad'), 'x')).toBe('The name is refused: bad.');
    const gone = new ApiError(404, 'not_found', 'that deleted state not found');
    expect(restoreRefusal(gone, 'x')).toBe('This deleted state is no longer kept (restored or purged meanwhile): that deleted state not found.');
    expect(purgeRefusal(gone)).toBe('This deleted state is no longer kept (restored or purged meanwhile): that deleted state not found.');
  });
  it('passes any other refusal on as the server says it', () => {
    expect(restoreRefusal(new ApiError(403, 'forbidden', 'permission denied: admins only'), 'x')).toBe('permission denied: admins only');
    expect(purgeRefusal(new ApiError(500, 'internal', 'boom'))).toBe('boom');
  });
});
