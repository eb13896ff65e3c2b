// The backend.hcl that points Terraform or OpenTofu's http backend at one state here.

/** backend.hcl for state `name` on the server at `origin` (e.g. `http://127.0.0.1:8080`). */
export function backendHcl(origin: string, name: string, user: string): string {
  const base = `${origin}/api/tf-states/${name}`;
  return [
    `address        = "${base}/state"`,
    `lock_address   = "${base}/lock"`,
    `unlock_address = "${base}/lock"`,
    `lock_method    = "POST"`,
    `unlock_method  = "DELETE"`,
    `username       = "${user}"`,
    '',
  ].join('\n');
}
