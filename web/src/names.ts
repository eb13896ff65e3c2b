// The state naming rule (shared/src/domain/name.rs): 1-128 of A-Z a-z 0-9 . _ -, not
// starting with '.'. Checked as the person types; the server checks again.

export const MAX_NAME = 128;

/** Why `name` is not a valid state name, or `null` when it is. */
export function nameProblem(name: string): string | null {
  if (name.length === 0) return 'A state name cannot be empty.';
  if (name.length > MAX_NAME) return `A state name is at most ${MAX_NAME} characters; this one has ${name.length}.`;
  if (name.startsWith('.')) return "A state name cannot start with '.'.";
  const bad = [...name].find((c) => !/[A-Za-z0-9._-]/.test(c));
  if (bad !== undefined) return `A state name may only hold A-Z, a-z, 0-9, '.', '_' and '-'; found '${bad}'.`;
  return null;
}

/** The name an imported file suggests: its name without a `.tfstate` or `.json` ending. */
export function nameFromFile(file: string): string {
  return file.replace(/\.(tfstate|json)$/i, '');
}
