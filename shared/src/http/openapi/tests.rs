//! The unit tests of `openapi`, beside it so that the file holds its code alone.

use super::*;
use std::collections::BTreeSet;

use crate::http::Handler;

use crate::domain::audit::AuditAction;

/// The schemas `openapi.json` writes by hand: the request bodies, which the handlers read
/// field by field, and the tools' own lock document (also a 423's body).
const REQUEST_BODIES: &[&str] = &[
    "LockDocument",
    "UnlockDocument",
    "StateDocument",
    "RollbackRequest",
    "MintRequest",
    "AllocationChange",
    "AppLockRequest",
    "RestoreRequest",
    "IdTokenExchange",
    "TrustPolicyRequest",
    "TrustPolicyReplace",
    "ProtectionRequest",
];

/// The statuses every row brings, whatever its handler says.
const GENERATED_STATUSES: &[u16] = &[400, 401, 403, 413, 500, 503];

fn described() -> Value {
    serde_json::from_str(DESCRIBED).expect("openapi.json is JSON")
}

fn document() -> Value {
    serde_json::from_str(super::document()).expect("the document is JSON")
}

/// The served document, kept in the tree: a change to the API shows in review as a diff
/// of this file, and the pages' and Octo client's types are generated from it. After a
/// deliberate change, `UPDATE_EXPECT=1 cargo test -p hegemony-state --lib openapi`
/// rewrites it.
#[test]
fn the_served_document_is_the_one_in_the_tree() {
    let pretty = serde_json::to_string_pretty(&document()).expect("the document serializes");
    expect_test::expect_file!["../../../../docs/api/openapi.json"]
        .assert_eq(&format!("{pretty}\n"));
}

/// Every schema of an answered body is derived from a Rust type, never written by hand.
#[test]
fn the_hand_written_schemas_are_request_bodies_only() {
    let written = described();
    let derived = derived();
    for name in written["components"]["schemas"].as_object().unwrap().keys() {
        assert!(
            !derived.contains_key(name),
            "openapi.json writes {name} by hand, which a Rust type derives: remove it"
        );
        assert!(
            REQUEST_BODIES.contains(&name.as_str()),
            "openapi.json writes {name} by hand: only request bodies (and the tools' own lock document) are"
        );
    }
}

#[test]
fn every_route_is_described() {
    let doc = described();
    for route in ROUTES.iter().filter(|r| !r.local_only) {
        let op = &doc["paths"][route.path][route.method.to_ascii_lowercase()];
        assert!(
            op.is_object(),
            "{} {} has no entry in openapi.json: add its summary, query, body and own statuses there",
            route.method,
            route.path
        );
    }
}

#[test]
fn every_described_operation_is_a_route() {
    let doc = described();
    for (path, ops) in doc["paths"].as_object().unwrap() {
        for method in ops.as_object().unwrap().keys() {
            let method = method.to_ascii_uppercase();
            assert!(
                ROUTES
                    .iter()
                    .any(|r| r.path == path && r.method == method && !r.local_only),
                "openapi.json describes {method} {path}, which no route serves"
            );
        }
    }
}

/// What the table says is said once: an entry that repeats it would drift from it.
#[test]
fn entries_leave_the_rows_facts_to_the_table() {
    let doc = described();
    for route in ROUTES.iter().filter(|r| !r.local_only) {
        let op = &doc["paths"][route.path][route.method.to_ascii_lowercase()];
        let label = format!("{} {}", route.method, route.path);
        assert!(
            op.get("security").is_none(),
            "{label}: the row's handler says its credentials; remove \"security\""
        );
        for p in op["parameters"].as_array().into_iter().flatten() {
            assert_eq!(
                p["in"], "query",
                "{label}: path parameters come from the row's path; remove {}",
                p["name"]
            );
        }
        for (status, response) in op["responses"].as_object().unwrap() {
            let code: u16 = status
                .parse()
                .unwrap_or_else(|_| panic!("{label}: status {status}"));
            if code >= 400 {
                assert!(
                    response.get("content").is_none(),
                    "{label} {status}: the error envelope (or the lock document for 423) is added from the error table; remove \"content\""
                );
                assert!(
                    ErrorCode::ALL.iter().any(|c| c.status().as_u16() == code),
                    "{label}: no error code answers {status}"
                );
            }
        }
    }
}

/// Every row's path parameters have a schema, the one its handler checks.
#[test]
fn every_path_parameter_has_a_schema() {
    for route in ROUTES {
        for name in path_parameters(route.path) {
            assert!(
                path_parameter(name).is_some(),
                "{} {}: {{{name}}} has no schema in openapi.rs",
                route.method,
                route.path
            );
        }
    }
}

/// Each generated status lists the codes that answer with it, from the table.
#[test]
fn every_operation_lists_the_rows_statuses_with_their_bodies() {
    let doc = document();
    for route in ROUTES.iter().filter(|r| !r.local_only) {
        let op = &doc["paths"][route.path][route.method.to_ascii_lowercase()];
        let responses = op["responses"].as_object().unwrap();
        for status in GENERATED_STATUSES {
            let open = matches!(route.handler, Handler::Open);
            if open && (*status == 401 || *status == 403) {
                assert!(!responses.contains_key(&status.to_string()));
                continue;
            }
            let response = &responses[&status.to_string()];
            assert_eq!(
                response["content"]["application/json"]["schema"]["$ref"],
                "#/components/schemas/Error",
                "{} {} {status}",
                route.method,
                route.path
            );
        }
        if let Some(locked) = responses.get("423") {
            let expected = if route.path.starts_with("/api/apps/") {
                "#/components/schemas/AppLockedError"
            } else {
                "#/components/schemas/LockDocument"
            };
            assert_eq!(
                locked["content"]["application/json"]["schema"]["$ref"],
                expected
            );
        }
        assert!(responses["503"]["headers"]["Retry-After"].is_object());
    }
}

#[test]
fn the_error_codes_are_the_tables() {
    let doc = document();
    let listed: Vec<&str> = doc["components"]["schemas"]["Error"]["properties"]["error"]
        ["properties"]["code"]["enum"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    let codes: Vec<&str> = ErrorCode::ALL.iter().map(|c| c.as_str()).collect();
    assert_eq!(listed, codes);
}

#[test]
fn credentials_follow_the_rows_handler() {
    let doc = document();
    let security = |method: &str, path: &str| doc["paths"][path][method].get("security").cloned();
    assert_eq!(security("get", "/api/openapi.json"), Some(json!([])));
    assert_eq!(
        security("post", "/api/tf-states/{name}/state"),
        Some(json!([{"token": []}, {"basic": []}]))
    );
    assert_eq!(
        security("get", "/api/tf-states"),
        Some(json!([{"token": []}]))
    );
    assert_eq!(
        security("post", "/api/runs/{run}/end"),
        Some(json!([{"platform": []}]))
    );
}

/// The lock path says, in words and in its extension, which methods only some servers answer.
#[test]
fn local_only_methods_are_described_on_their_path() {
    let doc = document();
    let item = &doc["paths"]["/api/tf-states/{name}/lock"];
    assert_eq!(
        item["x-local-only-methods"],
        json!({"LOCK": "the same as POST", "UNLOCK": "the same as DELETE"})
    );
    assert!(item["description"]
        .as_str()
        .unwrap()
        .contains("LOCK (the same as POST)"));
    assert!(item.get("lock").is_none());
}

/// The documented page sizes are the ones the handlers accept.
#[test]
fn the_limits_are_the_handlers() {
    use crate::service::{admin::MAX_AUDIT_PAGE, listing::MAX_PAGE};
    let doc = described();
    for (path, max) in [
        ("/api/tf-states", MAX_PAGE),
        ("/api/tf-states/", MAX_PAGE),
        ("/api/audit", MAX_AUDIT_PAGE),
        ("/api/tf-states/{name}/audit", MAX_AUDIT_PAGE),
        ("/api/apps", crate::service::app_reads::MAX_APPS_PAGE),
        (
            "/api/apps/{name}/archives",
            crate::service::app_reads::MAX_ARCHIVES_PAGE,
        ),
    ] {
        let params = doc["paths"][path]["get"]["parameters"].as_array().unwrap();
        let limit = params.iter().find(|p| p["name"] == "limit").unwrap();
        assert_eq!(limit["schema"]["maximum"], max, "{path}");
    }
    let lock = &doc["components"]["schemas"]["LockDocument"]["properties"]["ID"];
    assert_eq!(lock["maxLength"], crate::domain::lock::MAX_LOCK_ID_CHARS);
}

/// The document's list of audit actions is what a client generated from it accepts.
#[test]
fn the_audit_actions_are_the_domains() {
    let doc = document();
    let schemas = &doc["components"]["schemas"];
    let actions: BTreeSet<&str> = AuditAction::ALL.iter().map(|a| a.as_str()).collect();
    let listed: BTreeSet<&str> = schemas["AuditAction"]["enum"]
        .as_array()
        .expect("an enum of audit actions")
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(listed, actions);
    assert_eq!(
        schemas["AuditEntry"]["properties"]["action"]["$ref"],
        "#/components/schemas/AuditAction"
    );
}

#[test]
fn every_reference_resolves() {
    let doc = document();
    let text = super::document();
    for part in text.split("\"#/components/schemas/").skip(1) {
        let name = part.split('"').next().unwrap();
        assert!(
            doc["components"]["schemas"][name].is_object(),
            "missing schema {name}"
        );
    }
}

/// Every link names an operation the document has, and only parameters it takes.
#[test]
fn every_link_leads_to_an_operation() {
    let doc = document();
    let mut ids = std::collections::BTreeMap::new();
    for ops in doc["paths"].as_object().unwrap().values() {
        for (method, op) in ops.as_object().unwrap() {
            if let Some(id) = op.get("operationId").and_then(Value::as_str) {
                assert!(
                    ids.insert(id.to_owned(), op.clone()).is_none(),
                    "operationId {id} twice ({method})"
                );
            }
        }
    }
    for ops in doc["paths"].as_object().unwrap().values() {
        for op in ops.as_object().unwrap().values().filter(|o| o.is_object()) {
            for response in op["responses"]
                .as_object()
                .into_iter()
                .flat_map(|r| r.values())
            {
                for link in response["links"]
                    .as_object()
                    .into_iter()
                    .flat_map(|l| l.values())
                {
                    let id = link["operationId"].as_str().unwrap();
                    let target = ids
                        .get(id)
                        .unwrap_or_else(|| panic!("a link leads to {id}, which no operation is"));
                    if link.get("requestBody").is_some() {
                        assert!(
                            target["requestBody"].is_object(),
                            "a link gives {id} a body it does not take"
                        );
                    }
                    let given = link["parameters"].as_object().into_iter().flatten();
                    for name in given.map(|(name, _)| name) {
                        let name = name.rsplit('.').next().unwrap();
                        assert!(
                            target["parameters"]
                                .as_array()
                                .unwrap()
                                .iter()
                                .any(|p| p["name"] == name),
                            "a link gives {name} to {}, which takes none",
                            link["operationId"]
                        );
                    }
                }
            }
        }
    }
}
