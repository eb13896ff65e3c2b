//! Lock documents and the lock and unlock rules: (record, request, principal, now) ->
//! decision. No I/O, no status codes.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use time::format_description::well_known::Rfc3339;

use super::actor::StepKind;
use super::hold::check_hold;
use super::permission::{Allocation, Permission};
use super::record::StateRecord;
use super::{rfc3339, Actor, Principal, Refusal, Timestamp};

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
    let mut object = parse_object(body, |reason| Refusal::InvalidLock { reason })?;
    let invalid = |reason: String| Refusal::InvalidLock { reason };
    let mut field = |name: &'static str| -> Result<Option<String>, Refusal> {
        match object.remove(name) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(other) => Err(invalid(format!(
                "\"{name}\" must be a string, not {}",
                json_type(&other)
            ))),
        }
    };
    let id = field("ID")?;
    let doc = LockDocument {
        id: String::new(),
        operation: field("Operation")?,
        info: field("Info")?,
        who: field("Who")?,
        version: field("Version")?,
        created: field("Created")?.filter(|c| time::OffsetDateTime::parse(c, &Rfc3339).is_ok()),
        path: field("Path")?,
    };
    let id = id.ok_or_else(|| invalid("it has no \"ID\"".into()))?;
    check_lock_id(&id).map_err(invalid)?;
    if id.starts_with(HOLD_ID_PREFIX) {
        return Err(invalid(format!(
            "lock IDs starting with \"{HOLD_ID_PREFIX}\" are reserved for runs' holds"
        )));
    }
    Ok(LockDocument { id, ..doc })
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
    /// The id of the step token that took it; `None` for a person's lock.
    #[serde(default)]
    pub token: Option<String>,
}

impl Lock {
    pub fn id(&self) -> &str {
        &self.document.id
    }

    pub fn is_live(&self, now: Timestamp) -> bool {
        self.live_until.is_none_or(|until| now < until)
    }
}

/// What a lock request gets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LockDecision {
    /// Take this lock.
    Granted(Box<Lock>),
    /// The caller already holds the lock with this ID: a retried request.
    AlreadyHeld,
}

/// Decides a lock request.
///
/// # Errors
/// `Locked` with the holder's document when another lock is live, or when the caller holds
/// the state under a different ID.
pub fn decide_lock(
    record: &StateRecord,
    mut document: LockDocument,
    principal: &Principal,
    now: Timestamp,
) -> Result<LockDecision, Refusal> {
    if let Some(lock) = record.live_lock(now) {
        if lock.id() == document.id && principal.holds(lock) {
            return Ok(LockDecision::AlreadyHeld);
        }
        return Err(locked_by(lock));
    }
    check_hold(record.hold.as_ref(), principal)?;
    if document.info.as_deref().unwrap_or("").is_empty() {
        // Newer clients print the holder's Info on a conflict: make it say who and since when.
        document.info = Some(format!(
            "{} since {}",
            principal.actor.describe(),
            rfc3339(now)
        ));
    }
    // A step's lock lives as long as its token; a person's never expires.
    let step = principal.step.as_ref();
    Ok(LockDecision::Granted(Box::new(Lock {
        document,
        holder: principal.actor.clone(),
        since: now,
        live_until: step.map(|g| g.expires_at),
        version_opened: None,
        token: step.map(|g| g.token_id.clone()),
    })))
}

/// The refusal for a request blocked by `lock`.
pub fn locked_by(lock: &Lock) -> Refusal {
    Refusal::Locked {
        lock_id: lock.id().to_owned(),
        holder: lock.holder.describe(),
        document: lock.document.to_json(),
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

/// What an unlock request does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnlockDecision {
    /// Nothing to release: 200, for retried requests.
    NotLocked,
    /// Release the lock; `forced` when the caller is not its holder; `end_hold` when the run's
    /// hold ends with it (a force, or the run's apply releasing its lock).
    Release { forced: bool, end_hold: bool },
    /// End the run's hold and leave any lock alone (`hold-<run>` named, or an empty forced
    /// unlock when only a hold stands).
    EndHold,
}

/// Decides an unlock request. A named ID must be the current lock's (or the hold's); the
/// holder releases its own lock, and releasing anyone else's lock or a hold is a force that
/// needs tf_state:manage, which a step token never has.
///
/// # Errors
/// `LockIdMismatch` for an ID that is neither the current lock's nor the hold's;
/// `NotYourLock` for a force without tf_state:manage.
pub fn decide_unlock(
    record: &StateRecord,
    request: &UnlockRequest,
    principal: &Principal,
    allocation: &Allocation,
    now: Timestamp,
) -> Result<UnlockDecision, Refusal> {
    let may_force =
        principal.step.is_none() && allocation.allows(principal.role, Permission::Manage);
    let refuse_force = |holder: String, lock_id: String| Refusal::NotYourLock { holder, lock_id };
    let hold = record.hold.as_ref();
    if let UnlockRequest::Named(id) = request {
        if id.starts_with(HOLD_ID_PREFIX) {
            return match hold.filter(|h| h.id() == *id) {
                None => Ok(UnlockDecision::NotLocked),
                Some(_) if may_force => Ok(UnlockDecision::EndHold),
                Some(h) => Err(refuse_force(format!("run {}", h.run), h.id())),
            };
        }
    }
    let Some(lock) = record.live_lock(now) else {
        return Ok(match (request, hold) {
            (UnlockRequest::Empty, Some(_)) if may_force => UnlockDecision::EndHold,
            _ => UnlockDecision::NotLocked,
        });
    };
    if let UnlockRequest::Named(id) = request {
        if id != lock.id() {
            return Err(Refusal::LockIdMismatch {
                given: id.clone(),
                current: Some(lock.id().to_owned()),
            });
        }
    }
    if principal.holds(lock) {
        // The run's apply releasing its lock is what a hold waits for.
        let apply_of_run = principal
            .step
            .as_ref()
            .is_some_and(|g| g.kind == StepKind::Apply && hold.is_some_and(|h| h.run == g.run));
        return Ok(UnlockDecision::Release {
            forced: false,
            end_hold: apply_of_run,
        });
    }
    if may_force {
        // A force releases whatever is held: an empty body ends the hold too.
        let end_hold = *request == UnlockRequest::Empty && hold.is_some();
        return Ok(UnlockDecision::Release {
            forced: true,
            end_hold,
        });
    }
    Err(refuse_force(lock.holder.describe(), lock.id().to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::permission::Role;
    use time::macros::datetime;

    const NOW: Timestamp = datetime!(2026-11-30 01:00:00 UTC);

    fn principal(user: &str, role: Role) -> Principal {
        Principal {
            org: "acme".into(),
            role,
            actor: Actor::User { user: user.into() },
            step: None,
        }
    }

    fn doc(id: &str) -> LockDocument {
        parse_lock(format!(r#"{{"ID":"{id}","Operation":"OperationTypeApply","Info":"","Who":"me@host","Version":"1.11.4","Created":"2026-11-30T01:07:12.730574508Z","Path":""}}"#).as_bytes()).unwrap()
    }

    fn locked_record(id: &str, holder: &str) -> StateRecord {
        let mut record = StateRecord::fresh("acme", "net", "inc1", NOW);
        let LockDecision::Granted(lock) =
            decide_lock(&record, doc(id), &principal(holder, Role::Operator), NOW).unwrap()
        else {
            panic!("expected a grant")
        };
        record.lock = Some(*lock);
        record
    }

    fn invalid_lock(body: &str) -> String {
        match parse_lock(body.as_bytes()) {
            Err(Refusal::InvalidLock { reason }) => reason,
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
    fn an_id_of_255_multibyte_characters_is_accepted() {
        assert!(parse_lock(format!(r#"{{"ID":"{}"}}"#, "é".repeat(255)).as_bytes()).is_ok());
    }

    #[test]
    fn granting_fills_an_empty_info_with_the_holder_and_time() {
        let record = locked_record("L1", "alice");
        let lock = record.lock.unwrap();
        assert_eq!(
            lock.document.info.as_deref(),
            Some("user alice since 2026-11-30T01:00:00Z")
        );
        assert_eq!(
            lock.holder,
            Actor::User {
                user: "alice".into()
            }
        );
    }

    #[test]
    fn a_client_info_is_kept() {
        let record = StateRecord::fresh("acme", "net", "inc1", NOW);
        let d = parse_lock(br#"{"ID":"a","Info":"mine"}"#).unwrap();
        let LockDecision::Granted(lock) =
            decide_lock(&record, d, &principal("a", Role::Operator), NOW).unwrap()
        else {
            panic!()
        };
        assert_eq!(lock.document.info.as_deref(), Some("mine"));
    }

    #[test]
    fn lock_held_by_other_is_refused_with_the_holders_document() {
        let record = locked_record("L1", "alice");
        let err = decide_lock(&record, doc("L2"), &principal("bob", Role::Admin), NOW).unwrap_err();
        let Refusal::Locked {
            lock_id, document, ..
        } = err
        else {
            panic!("expected Locked")
        };
        assert_eq!(lock_id, "L1");
        assert!(document.contains(r#""ID":"L1""#) && document.contains("user alice since"));
    }

    #[test]
    fn the_same_holder_relocking_with_the_same_id_is_already_held() {
        let record = locked_record("L1", "alice");
        let alice = principal("alice", Role::Operator);
        assert_eq!(
            decide_lock(&record, doc("L1"), &alice, NOW),
            Ok(LockDecision::AlreadyHeld)
        );
        assert!(decide_lock(&record, doc("L2"), &alice, NOW).is_err());
        assert!(decide_lock(&record, doc("L1"), &principal("bob", Role::Operator), NOW).is_err());
    }

    #[test]
    fn an_expired_lock_reads_as_unlocked() {
        let mut record = locked_record("L1", "alice");
        record.lock.as_mut().unwrap().live_until = Some(NOW);
        let bob = principal("bob", Role::Operator);
        assert!(matches!(
            decide_lock(&record, doc("L2"), &bob, NOW),
            Ok(LockDecision::Granted(_))
        ));
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

    #[test]
    fn the_holder_releases_its_own_lock_by_id_or_with_an_empty_body() {
        let record = locked_record("L1", "alice");
        let alice = principal("alice", Role::Operator);
        let a = Allocation::default();
        for req in [UnlockRequest::Empty, UnlockRequest::Named("L1".into())] {
            assert_eq!(
                decide_unlock(&record, &req, &alice, &a, NOW),
                Ok(UnlockDecision::Release {
                    forced: false,
                    end_hold: false
                })
            );
        }
    }

    #[test]
    fn a_named_id_must_be_the_current_lock() {
        let record = locked_record("L1", "alice");
        let err = decide_unlock(
            &record,
            &UnlockRequest::Named("OLD".into()),
            &principal("alice", Role::Admin),
            &Allocation::default(),
            NOW,
        )
        .unwrap_err();
        assert_eq!(
            err,
            Refusal::LockIdMismatch {
                given: "OLD".into(),
                current: Some("L1".into())
            }
        );
    }

    #[test]
    fn releasing_someone_elses_lock_needs_manage_even_with_its_id() {
        let record = locked_record("L1", "alice");
        let a = Allocation::default();
        for req in [UnlockRequest::Empty, UnlockRequest::Named("L1".into())] {
            assert!(matches!(
                decide_unlock(&record, &req, &principal("bob", Role::Operator), &a, NOW),
                Err(Refusal::NotYourLock { .. })
            ));
            assert_eq!(
                decide_unlock(&record, &req, &principal("root", Role::Admin), &a, NOW),
                Ok(UnlockDecision::Release {
                    forced: true,
                    end_hold: false
                })
            );
        }
    }

    #[test]
    fn unlocking_an_unlocked_state_is_not_locked_even_with_an_id() {
        let record = StateRecord::fresh("acme", "net", "inc1", NOW);
        assert_eq!(
            decide_unlock(
                &record,
                &UnlockRequest::Named("X".into()),
                &principal("bob", Role::Viewer),
                &Allocation::default(),
                NOW
            ),
            Ok(UnlockDecision::NotLocked)
        );
    }
}
