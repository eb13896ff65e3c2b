//! `GET /api/openapi.json`: the OpenAPI document of every route and shape, kept beside the
//! route table and checked against it by a test.

use lambda_http::http::{header, StatusCode};
use lambda_http::{Body, Response};

/// The document, as served.
pub const DOCUMENT: &str = include_str!("openapi.json");

pub fn response() -> Response<Body> {
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::Text(DOCUMENT.to_owned()))
        .expect("static headers are valid")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    use crate::domain::audit::AuditAction;
    use crate::http::ROUTES;

    fn document() -> serde_json::Value {
        serde_json::from_str(DOCUMENT).expect("openapi.json is JSON")
    }

    #[test]
    fn every_route_is_described() {
        let doc = document();
        for route in ROUTES.iter().filter(|r| !r.local_only) {
            let op = &doc["paths"][route.path][route.method.to_ascii_lowercase()];
            assert!(
                op.is_object(),
                "{} {} is not in openapi.json",
                route.method,
                route.path
            );
        }
    }

    #[test]
    fn every_described_operation_is_a_route() {
        let doc = document();
        for (path, ops) in doc["paths"].as_object().unwrap() {
            for method in ops.as_object().unwrap().keys() {
                let method = method.to_ascii_uppercase();
                assert!(
                    ROUTES.iter().any(|r| r.path == path && r.method == method),
                    "openapi.json describes {method} {path}, which no route serves"
                );
            }
        }
    }

    /// The document's list of audit actions is what a client generated from it accepts.
    #[test]
    fn the_audit_actions_are_the_domains() {
        let doc = document();
        let described: BTreeSet<&str> = doc["components"]["schemas"]["AuditEntry"]["properties"]
            ["action"]["enum"]
            .as_array()
            .expect("AuditEntry.action lists its values")
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        let actions: BTreeSet<&str> = AuditAction::ALL.iter().map(|a| a.as_str()).collect();
        assert_eq!(described, actions);
    }

    #[test]
    fn every_reference_resolves() {
        let doc = document();
        let text = DOCUMENT;
        for part in text.split("\"#/components/schemas/").skip(1) {
            let name = part.split('"').next().unwrap();
            assert!(
                doc["components"]["schemas"][name].is_object(),
                "missing schema {name}"
            );
        }
    }
}
