//! Lock nouns: the lock document as the tools send it (`LockInfo`), the lock and unlock
//! bodies it is parsed from, and the lock a state record stores. The rules that grant and
//! release locks are in `locking`. No I/O, no status codes.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use time::format_description::well_known::Rfc3339;

use super::{Actor, Principal, Refusal, Timestamp};

/// The largest lock or unlock body accepted.
pub const MAX_LOCK_BYTES: usize = 16 * 1024;

/// The longest lock ID accepted, in characters.
pub const MAX_LOCK_ID_CHARS: usize = 255;

/// IDs with this prefix name a run's hold, never a lock.
pub const HOLD_ID_PREFIX: &str = "hold-";

/// A lock document as Terraform and OpenTofu send it (`LockInfo`), reduced to the fields the
/// tools know. Serialized in the tools' field order; absent fields are left out.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LockDocument {
    #[serde(rename = "ID")]
    pub id: String,
    #[serde(rename = "Operation", default, skip_serializing_if = "Option::is_none")]
    pub operation: Option<String>,
    #[serde(rename = "Info", default, skip_serializing_if = "Option::is_none")]
    pub info: Option<String>,
    #[serde(rename = "Who", default, skip_serializing_if = "Option::is_none")]
    pub who: Option<String>,
    #[serde(rename = "Version", default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    #[serde(rename = "Created", default, skip_serializing_if = "Option::is_none")]
    pub created: Option<String>,
    #[serde(rename = "Path", default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
}

impl LockDocument {
    /// The JSON a conflict answers with.
    pub fn to_json(&self) -> String {
        // Serializing a struct of strings to JSON cannot fail.
        serde_json::to_string(self).expect("lock document serializes")
    }
}

/// Parses and checks a lock request body.
///
/// # Errors
/// `BodyTooLarge` over 16 KiB; `InvalidLock` for a body that is not a JSON object, an ID
/// that is missing, empty, longer than 255 characters or starts with `hold-`, or a known
/// field that is not a string. Unknown fields and a `Created` that is not RFC 3339 are
/// dropped, since other lockers read `Created` back as a time.
pub fn parse_lock(body: &[u8]) -> Result<LockDocument, Refusal> {
    let mut object = parse_object(body, |reason| Refusal::InvalidLock {
        reason,
        lock_id: None,
    })?;
    let not_a_string = |name: &str, other: &Value| {
        format!("\"{name}\" must be a string, not {}", json_type(other))
    };
    // The ID is read first, so every later refusal names it for the log.
    let id = match object.remove("ID") {
        None => None,
        Some(Value::String(s)) => Some(s),
        Some(other) => {
            return Err(Refusal::InvalidLock {
                reason: not_a_string("ID", &other),
                lock_id: None,
            })
        }
    };
    let invalid = |reason: String| Refusal::InvalidLock {
        reason,
        lock_id: id.clone(),
    };
    let mut field = |name: &'static str| -> Result<Option<String>, Refusal> {
        match object.remove(name) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(other) => Err(invalid(not_a_string(name, &other))),
        }
    };
    let doc = LockDocument {
        id: String::new(),
        operation: field("Operation")?,
        info: field("Info")?,
        who: field("Who")?,
        version: field("Version")?,
        created: field("Created")?.filter(|c| time::OffsetDateTime::parse(c, &Rfc3339).is_ok()),
        path: field("Path")?,
    };
    let Some(id) = &id else {
        return Err(invalid("it has no \"ID\"".into()));
    };
    check_lock_id(id).map_err(invalid)?;
    if id.starts_with(HOLD_ID_PREFIX) {
        return Err(invalid(format!(
            "lock IDs starting with \"{HOLD_ID_PREFIX}\" are reserved for runs' holds"
        )));
    }
    Ok(LockDocument {
        id: id.clone(),
        ..doc
    })
}

fn check_lock_id(id: &str) -> Result<(), String> {
    let chars = id.chars().count();
    if chars == 0 {
        return Err("\"ID\" must not be empty".into());
    }
    if chars > MAX_LOCK_ID_CHARS {
        return Err(format!(
            "\"ID\" is at most {MAX_LOCK_ID_CHARS} characters; this one has {chars}"
        ));
    }
    Ok(())
}

/// The lock ID a lock or unlock body names, read leniently (any JSON object with a string
/// `ID`), for the log line of a refusal that comes before the body is checked: a request
/// refused for its role or a missing key still names the lock it was about.
pub fn named_id(body: &[u8]) -> Option<String> {
    if body.len() > MAX_LOCK_BYTES {
        return None;
    }
    match serde_json::from_slice::<Value>(body).ok()? {
        Value::Object(mut object) => match object.remove("ID")? {
            Value::String(id) if !id.is_empty() => Some(id),
            _ => None,
        },
        _ => None,
    }
}

fn parse_object(
    body: &[u8],
    invalid: impl Fn(String) -> Refusal,
) -> Result<Map<String, Value>, Refusal> {
    if body.len() > MAX_LOCK_BYTES {
        return Err(Refusal::BodyTooLarge {
            limit: MAX_LOCK_BYTES as u64,
        });
    }
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(object)) => Ok(object),
        Ok(other) => Err(invalid(format!(
            "the body must be a JSON object, not {}",
            json_type(&other)
        ))),
        Err(e) => Err(invalid(format!("the body is not JSON: {e}"))),
    }
}

fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// An unlock request: Terraform's force-unlock sends no body; everything else names a lock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UnlockRequest {
    Empty,
    Named(String),
}

/// Parses an unlock body: empty, Terraform's lock document, or OpenTofu's `{"ID": ...}`.
///
/// # Errors
/// `BodyTooLarge` over 16 KiB; `InvalidUnlock` for a body that is not a JSON object or
/// names no ID.
pub fn parse_unlock(body: &[u8]) -> Result<UnlockRequest, Refusal> {
    if body.iter().all(u8::is_ascii_whitespace) && body.len() <= MAX_LOCK_BYTES {
        return Ok(UnlockRequest::Empty);
    }
    let object = parse_object(body, |reason| Refusal::InvalidUnlock { reason })?;
    match object.get("ID") {
        Some(Value::String(id)) if !id.is_empty() => Ok(UnlockRequest::Named(id.clone())),
        Some(Value::String(_)) | None => Err(Refusal::InvalidUnlock {
            reason: "it names no lock: \"ID\" is missing or empty (send no body to release whatever lock you hold)".into(),
        }),
        Some(other) => Err(Refusal::InvalidUnlock {
            reason: format!("\"ID\" must be a string, not {}", json_type(other)),
        }),
    }
}

/// A lock held on a state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lock {
    /// The document as stored: the client's, with Info naming the holder when it was empty.
    pub document: LockDocument,
    pub holder: Actor,
    #[serde(with = "time::serde::rfc3339")]
    pub since: Timestamp,
    /// When the lock stops being live; `None` for a person's lock, which never expires.
    #[serde(default, with = "time::serde::rfc3339::option")]
    pub live_until: Option<Timestamp>,
    /// The version this acquisition opened with its first `?ID=` write, which later writes
    /// under the same acquisition replace (DESIGN section 6).
    pub version_opened: Option<u64>,
    /// Versions this acquisition opened before `version_opened`, which a save of the holder's
    /// own without an ID put behind: no write reaches them any more, but they stay open until
    /// the lock ends, and close with it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub earlier_versions_opened: Vec<u64>,
    /// The id of the step or session token that took it; `None` for a person's lock.
    #[serde(default)]
    pub token: Option<String>,
}

impl Lock {
    /// Every version this acquisition opened and has not closed, oldest first.
    pub fn versions_opened(&self) -> impl Iterator<Item = u64> + '_ {
        self.earlier_versions_opened
            .iter()
            .copied()
            .chain(self.version_opened)
    }

    pub fn id(&self) -> &str {
        &self.document.id
    }

    pub fn is_live(&self, now: Timestamp) -> bool {
        self.live_until.is_none_or(|until| now < until)
    }

    /// Whether `principal` holds this lock: a person's lock belongs to the (org, user), a
    /// step's or a workload session's to the token that took it, so the cleanup of one
    /// attempt never frees another's lock, nor one job's session another job's.
    pub fn is_held_by(&self, principal: &Principal) -> bool {
        let taken_with = principal
            .step
            .as_ref()
            .map(|g| &g.token_id)
            .or(principal.session.as_ref().map(|g| &g.token_id));
        match (taken_with, &self.token) {
            (Some(id), Some(token)) => id == token,
            (None, None) => principal.actor == self.holder,
            _ => false,
        }
    }

    /// The refusal for a request this lock stands in the way of; `requested` is the lock ID
    /// the request named, if any.
    pub fn refusal(&self, requested: Option<&str>) -> Refusal {
        Refusal::Locked {
            lock_id: self.id().to_owned(),
            holder: self.holder.describe(),
            document: self.document.to_json(),
            requested: requested.map(str::to_owned),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn invalid_lock(body: &str) -> String {
        match parse_lock(body.as_bytes()) {
            Err(Refusal::InvalidLock { reason, .. }) => reason,
            other => panic!("expected InvalidLock for {body}, got {other:?}"),
        }
    }

    #[test]
    fn keeps_the_tools_fields_and_drops_unknown_ones() {
        let d = parse_lock(br#"{"ID":"a","Operation":"op","Extra":{"x":1},"Path":""}"#).unwrap();
        assert_eq!(d.to_json(), r#"{"ID":"a","Operation":"op","Path":""}"#);
    }

    #[test]
    fn drops_a_created_that_is_not_rfc3339() {
        let d = parse_lock(br#"{"ID":"a","Created":"2026-01-02 03:04:05"}"#).unwrap();
        assert_eq!(d.created, None);
        let d = parse_lock(br#"{"ID":"a","Created":"0001-01-01T00:00:00Z"}"#).unwrap();
        assert_eq!(d.created.as_deref(), Some("0001-01-01T00:00:00Z"));
    }

    #[test]
    fn lock_bodies_over_16_kib_are_too_large() {
        let body = format!(r#"{{"ID":"a","Info":"{}"}}"#, "x".repeat(MAX_LOCK_BYTES));
        assert_eq!(
            parse_lock(body.as_bytes()),
            Err(Refusal::BodyTooLarge { limit: 16384 })
        );
    }

    #[test]
    fn refuses_non_objects_bad_ids_and_non_string_fields() {
        assert!(invalid_lock("[1]").contains("JSON object"));
        assert!(invalid_lock("{nope").contains("not JSON"));
        assert!(invalid_lock(r#"{"Operation":"x"}"#).contains("no \"ID\""));
        assert!(invalid_lock(r#"{"ID":""}"#).contains("empty"));
        assert!(invalid_lock(&format!(r#"{{"ID":"{}"}}"#, "é".repeat(256))).contains("255"));
        assert!(invalid_lock(r#"{"ID":"hold-run1"}"#).contains("reserved"));
        assert!(invalid_lock(r#"{"ID":"a","Who":7}"#).contains("\"Who\" must be a string"));
        assert!(invalid_lock(r#"{"ID":5}"#).contains("\"ID\" must be a string"));
        assert!(invalid_lock(r#"{"ID":"a","Path":null}"#).contains("\"Path\""));
    }

    #[test]
    fn an_invalid_lock_names_the_id_it_could_read_for_the_log() {
        let ids = |body: &str| {
            parse_lock(body.as_bytes())
                .unwrap_err()
                .lock_ids()
                .join(",")
        };
        assert_eq!(ids(r#"{"ID":"hold-run1"}"#), "hold-run1");
        assert_eq!(ids(r#"{"ID":"a","Who":7}"#), "a");
        assert_eq!(ids(r#"{"ID":5}"#), "");
        assert_eq!(ids(r#"{"Operation":"x"}"#), "");
    }

    #[test]
    fn an_id_of_255_multibyte_characters_is_accepted() {
        assert!(parse_lock(format!(r#"{{"ID":"{}"}}"#, "é".repeat(255)).as_bytes()).is_ok());
    }

    #[test]
    fn unlock_bodies_empty_named_or_invalid() {
        assert_eq!(parse_unlock(b""), Ok(UnlockRequest::Empty));
        assert_eq!(
            parse_unlock(br#"{"ID":"x","Operation":"","Created":"0001-01-01T00:00:00Z"}"#),
            Ok(UnlockRequest::Named("x".into()))
        );
        assert!(matches!(
            parse_unlock(b"{}"),
            Err(Refusal::InvalidUnlock { .. })
        ));
        assert!(matches!(
            parse_unlock(br#"{"ID":""}"#),
            Err(Refusal::InvalidUnlock { .. })
        ));
        assert!(matches!(
            parse_unlock(b"nope"),
            Err(Refusal::InvalidUnlock { .. })
        ));
        assert!(matches!(
            parse_unlock(&vec![b' '; MAX_LOCK_BYTES + 1]),
            Err(Refusal::BodyTooLarge { .. })
        ));
    }
}
