// A state's outputs as the pages show them: a type as a configuration declares it, a value
// on one line, and the `terraform_remote_state` block that reads the outputs from another
// configuration (the token left to a variable: a page never writes one into a block).

import type { OutputValue } from './types';

/** `"string"` as `string`, `["list", "string"]` as `list(string)`, an object's members as `object({a = number})`. */
export function typeText(kind: unknown): string {
  if (typeof kind === 'string') return kind;
  if (Array.isArray(kind)) {
    const [outer, inner] = kind as [unknown, unknown];
    if ((outer === 'list' || outer === 'set' || outer === 'map') && inner !== undefined) {
      return `${outer}(${typeText(inner)})`;
    }
    if (outer === 'object' && inner && typeof inner === 'object' && !Array.isArray(inner)) {
      const members = Object.entries(inner as Record<string, unknown>).map(([k, v]) => `${k} = ${typeText(v)}`);
      return `object({${members.join(', ')}})`;
    }
    if (outer === 'tuple' && Array.isArray(inner)) {
      return `tuple([${inner.map((t) => typeText(t)).join(', ')}])`;
    }
  }
  return JSON.stringify(kind);
}

/** A value on one line: a string as it is, anything else as compact JSON. */
export function valueText(value: unknown): string {
  return typeof value === 'string' ? value : JSON.stringify(value);
}

/** Whether an output is shown by its type alone. */
export function isSensitive(output: OutputValue): output is Extract<OutputValue, { sensitive: true }> {
  return 'sensitive' in output && output.sensitive === true;
}

/** A state's name as an HCL block label: letters, digits, `_` and `-`, not starting with a digit or `-`. */
export function hclLabel(name: string): string {
  const label = name.replace(/[^A-Za-z0-9_-]/g, '_');
  return /^[A-Za-z_]/.test(label) ? label : `state_${label}`;
}

/**
 * The blocks a consumer configuration pastes to read state `name`'s outputs on the server
 * at `origin`: terraform_remote_state over the http backend at `.../outputs/state`, the
 * token in a sensitive variable, any username (the server reads only the password).
 */
export function remoteStateHcl(origin: string, name: string, user: string): string {
  const label = hclLabel(name);
  return [
    'variable "hegemony_token" {',
    '  type      = string',
    '  sensitive = true',
    '}',
    '',
    `data "terraform_remote_state" "${label}" {`,
    '  backend = "http"',
    '  config = {',
    `    address  = "${origin}/api/tf-states/${name}/outputs/state"`,
    `    username = "${user}"`,
    '    password = var.hegemony_token',
    '  }',
    '}',
    '',
    `# data.terraform_remote_state.${label}.outputs.<name>`,
    '',
  ].join('\n');
}
