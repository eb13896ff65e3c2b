//! A run's hold: a plan token minted with `hold: true` keeps the state for its run from the
//! plan to the apply, so nothing comes in between. Only that run's steps lock or write while
//! it stands; reading works.

use serde::{Deserialize, Serialize};

use super::lock::{LockDocument, HOLD_ID_PREFIX};
use super::{rfc3339, Principal, Refusal, Timestamp};

/// A hold on a state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hold {
    pub run: String,
    #[serde(with = "time::serde::rfc3339")]
    pub since: Timestamp,
}

impl Hold {
    /// `hold-<run>`, its ID for unlocks and conflicts.
    pub fn id(&self) -> String {
        format!("{HOLD_ID_PREFIX}{}", self.run)
    }

    /// The document a conflict answers with, shaped like a lock so the tools print it.
    pub fn document(&self) -> LockDocument {
        let since = rfc3339(self.since);
        LockDocument {
            id: self.id(),
            operation: Some("hold".into()),
            info: Some(format!(
                "held for run {} until its apply, since {since}",
                self.run
            )),
            who: Some(format!("run {}", self.run)),
            version: Some(String::new()),
            created: Some(since),
            path: Some(String::new()),
        }
    }

    /// Whether `principal` is one of the run's steps, which the hold lets through.
    pub fn admits(&self, principal: &Principal) -> bool {
        principal.step.as_ref().is_some_and(|g| g.run == self.run)
    }

    /// The refusal for a change the hold keeps out; `requested` is the lock ID the change
    /// named, if any.
    pub fn refusal(&self, requested: Option<&str>) -> Refusal {
        Refusal::Locked {
            lock_id: self.id(),
            holder: format!("run {}", self.run),
            document: self.document().to_json(),
            requested: requested.map(str::to_owned),
        }
    }
}

/// The hold a lock by `principal` sets: a plan token minted with `hold: true` holds the state
/// for its run in the same write that takes its lock.
pub fn hold_set_by(principal: &Principal, now: Timestamp) -> Option<Hold> {
    principal.step.as_ref().filter(|g| g.hold).map(|g| Hold {
        run: g.run.clone(),
        since: now,
    })
}

/// Refuses `principal` while someone else's run holds the state; `requested` is the lock ID
/// the request named, if any.
///
/// # Errors
/// `Locked` with the hold's document.
pub fn check_hold(
    hold: Option<&Hold>,
    principal: &Principal,
    requested: Option<&str>,
) -> Result<(), Refusal> {
    match hold {
        Some(hold) if !hold.admits(principal) => Err(hold.refusal(requested)),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::actor::{StepGrant, StepKind};
    use crate::domain::permission::Role;
    use crate::domain::Actor;
    use time::macros::datetime;

    const NOW: Timestamp = datetime!(2026-11-30 01:00:00 UTC);

    fn step(run: &str, hold: bool) -> Principal {
        Principal {
            session: None,
            org: "acme".into(),
            role: Role::Operator,
            actor: Actor::Step {
                run: run.into(),
                step: "plan".into(),
                attempt: 1,
            },
            step: Some(StepGrant {
                token_id: "t".into(),
                run: run.into(),
                step: "plan".into(),
                attempt: 1,
                state: "net".into(),
                kind: StepKind::Plan,
                hold,
                expires_at: NOW,
                token_hash: String::new(),
            }),
        }
    }

    #[test]
    fn the_hold_document_names_the_run_like_a_lock() {
        let hold = Hold {
            run: "r7".into(),
            since: NOW,
        };
        let doc: serde_json::Value = serde_json::from_str(&hold.document().to_json()).unwrap();
        assert_eq!(
            doc,
            serde_json::json!({"ID": "hold-r7", "Operation": "hold", "Info": "held for run r7 until its apply, since 2026-11-30T01:00:00Z", "Who": "run r7", "Version": "", "Created": "2026-11-30T01:00:00Z", "Path": ""})
        );
    }

    #[test]
    fn only_the_runs_steps_pass_a_hold() {
        let hold = Hold {
            run: "r7".into(),
            since: NOW,
        };
        assert!(check_hold(Some(&hold), &step("r7", false), None).is_ok());
        assert!(
            matches!(check_hold(Some(&hold), &step("r8", false), None), Err(Refusal::Locked { ref lock_id, .. }) if lock_id == "hold-r7")
        );
        let person = Principal {
            step: None,
            actor: Actor::User { user: "a".into() },
            ..step("x", false)
        };
        assert!(check_hold(Some(&hold), &person, None).is_err());
        assert!(check_hold(None, &person, None).is_ok());
    }

    #[test]
    fn only_a_plan_token_minted_with_hold_sets_one() {
        assert_eq!(
            hold_set_by(&step("r7", true), NOW),
            Some(Hold {
                run: "r7".into(),
                since: NOW
            })
        );
        assert_eq!(hold_set_by(&step("r7", false), NOW), None);
    }
}
