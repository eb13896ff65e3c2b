import { describe, expect, it } from 'vitest';

import { hclLabel, isSensitive, remoteStateHcl, typeText, valueText } from './outputs';

describe('outputs', () => {
  it('writes types as a configuration declares them', () => {
    expect(typeText('string')).toBe('string');
    expect(typeText(['list', 'string'])).toBe('list(string)');
    expect(typeText(['map', ['set', 'number']])).toBe('map(set(number))');
    expect(typeText(['object', { id: 'number', name: 'string' }])).toBe('object({id = number, name = string})');
    expect(typeText(['tuple', ['bool', 'string']])).toBe('tuple([bool, string])');
  });
  it('shows a string as it is and anything else as one line of JSON', () => {
    expect(valueText('db.example.com')).toBe('db.example.com');
    expect(valueText({ id: 7, tags: ['a'] })).toBe('{"id":7,"tags":["a"]}');
    expect(valueText(3)).toBe('3');
  });
  it('tells a sensitive output by its mark', () => {
    expect(isSensitive({ type: 'string', sensitive: true })).toBe(true);
    expect(isSensitive({ type: 'string', value: 'x' })).toBe(false);
  });
  it('makes a block label of any state name', () => {
    expect(hclLabel('network-core')).toBe('network-core');
    expect(hclLabel('prod.eu')).toBe('prod_eu');
    expect(hclLabel('1st')).toBe('state_1st');
    expect(hclLabel('-x')).toBe('state_-x');
  });
  it('reads the outputs over the http backend with the token left to a variable', () => {
    const hcl = remoteStateHcl('http://127.0.0.1:8080', 'prod.eu', 'alice');
    expect(hcl).toContain('data "terraform_remote_state" "prod_eu" {');
    expect(hcl).toContain('  backend = "http"');
    expect(hcl).toContain('    address  = "http://127.0.0.1:8080/api/tf-states/prod.eu/outputs/state"');
    expect(hcl).toContain('    username = "alice"');
    expect(hcl).toContain('    password = var.hegemony_token');
    expect(hcl).toContain('  sensitive = true');
    expect(hcl).not.toContain('hgs_');
  });
});
