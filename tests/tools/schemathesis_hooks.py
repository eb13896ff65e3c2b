"""Hooks for the API tester run by tests/openapi.rs.

A state's top-level `version` and `serial` must be integer literals: Terraform and OpenTofu
read them back as integers and cannot read `4.0`, so the server refuses such a state
(not_a_state), as the document says in words. JSON Schema 2020-12 counts `4.0` as the
integer 4 and has no keyword that tells the two apart, so the tester would send it as a
valid state; this hook writes those two fields as the tools do, and nothing else.

A new trust policy's audience must end with `/<org>`, the caller's org (docs/ci.md): no
schema can name the caller's org, so the document says it in words, and the same hook
ends each generated audience with `/default`, the org of the tester's admin, as an admin
writes it. Nothing else of the body is changed.
"""

import schemathesis

STATE_BODIES = {"POST /api/tf-states/{name}/state", "POST /api/tf-states/{name}/import"}


def _as_literal(value):
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


POLICY_BODIES = {"POST /api/org/trust-policies", "PUT /api/org/trust-policies/{name}"}
ORG = "default"
MAX_AUDIENCE = 512


def _in_the_org(body):
    """The policy body with its audience ended by `/default`, where that keeps it valid: an
    audience over the limit is an invalid case's, and stays as generated."""
    audience = body.get("audience")
    suffix = "/" + ORG
    if isinstance(audience, str) and audience and len(audience) <= MAX_AUDIENCE and not audience.endswith(suffix):
        body = dict(body)
        body["audience"] = audience[: MAX_AUDIENCE - len(suffix)] + suffix
    return body


@schemathesis.hook
def map_body(context, body):
    operation = getattr(context, "operation", None)
    if operation is None or not isinstance(body, dict):
        return body
    if operation.label in STATE_BODIES:
        return {
            key: _as_literal(value) if key in ("version", "serial") else value
            for key, value in body.items()
        }
    if operation.label in POLICY_BODIES:
        return _in_the_org(body)
    return body
