//! The API document's schemas for what the shapes write as plain text or by hand: a time
//! (RFC 3339), and the audit action, which entries carry as its name. The shapes derive
//! their schemas from their own types (`schemars`), so these are the only schemas written
//! out, each beside the rule that produces the text.

use std::borrow::Cow;

use schemars::{json_schema, JsonSchema, Schema, SchemaGenerator};

use super::audit::AuditAction;

/// A time as every shape shows it: RFC 3339 text in UTC ([`super::rfc3339`]).
pub struct Rfc3339;

impl JsonSchema for Rfc3339 {
    fn schema_name() -> Cow<'static, str> {
        "Rfc3339".into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({"type": "string", "format": "date-time"})
    }
}

impl JsonSchema for AuditAction {
    fn schema_name() -> Cow<'static, str> {
        "AuditAction".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        let names: Vec<&str> = AuditAction::ALL.iter().map(|a| a.as_str()).collect();
        json_schema!({
            "type": "string",
            "enum": names,
            "description": "What an entry records (docs/managing-states.md lists each)",
        })
    }
}
