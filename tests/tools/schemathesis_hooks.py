"""Hooks for the API tester run by tests/openapi.rs.

A state's top-level `version` and `serial` must be integer literals: Terraform and OpenTofu
read them back as integers and cannot read `4.0`, so the server refuses such a state
(not_a_state), as the document says in words. JSON Schema 2020-12 counts `4.0` as the
integer 4 and has no keyword that tells the two apart, so the tester would send it as a
valid state; this hook writes those two fields as the tools do, and nothing else.

A trust policy's `session_seconds` is read as an integer in the same way: the second hook
writes it as an integer literal.
"""

import schemathesis

STATE_BODIES = {"POST /api/tf-states/{name}/state", "POST /api/tf-states/{name}/import"}


def _as_literal(value):
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


@schemathesis.hook
def map_body(context, body):
    operation = getattr(context, "operation", None)
    if operation is None or operation.label not in STATE_BODIES:
        return body
    if isinstance(body, dict):
        return {
            key: _as_literal(value) if key in ("version", "serial") else value
            for key, value in body.items()
        }
    return body


POLICY_BODIES = {"POST /api/org/trust-policies", "PUT /api/org/trust-policies/{name}"}


@schemathesis.hook
def map_case(context, case):
    operation = getattr(context, "operation", None)
    if operation is None or operation.label not in POLICY_BODIES or not isinstance(case.body, dict):
        return case
    if "session_seconds" in case.body:
        case.body["session_seconds"] = _as_literal(case.body["session_seconds"])
    return case
