//! Protected states: an org's rules that only workload sessions of named trust policies may
//! change the states a name pattern matches ("writes only from protected branches"). Checking
//! a rule, and deciding whether a caller may change a state. No I/O, no status codes; which
//! policies exist is the service's to check.

use serde::{Deserialize, Serialize};

use super::actor::Principal;
use super::name::check_name;
use super::trust::{check_pattern, glob};
use super::Refusal;

/// The most rules an org holds and policies one rule names: enough for any layout of
/// environments, small enough that every backend request checks them all cheaply and that
/// they sit in the org's settings record (one DynamoDB item, under its 400 KB limit).
pub const MAX_PROTECTIONS: usize = 100;
pub const MAX_POLICIES: usize = 16;

/// One rule: the states `pattern` matches are changed only by sessions of `policies`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Protection {
    /// A state name, or a pattern where `*` stands for any run of characters, as trust
    /// policies' `states` write them.
    pub pattern: String,
    /// The trust policies whose sessions alone may change the states, by name.
    pub policies: Vec<String>,
}

/// What a caller asks to do to a state that a protection may forbid. Reading, unlocking its
/// own lock and an admin's force-unlock are never forbidden by one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    Lock,
    Write,
    Rollback,
    Import,
    Delete,
    /// A deleted state restored onto the name.
    Restore,
}

impl Change {
    fn verb(self) -> &'static str {
        match self {
            Change::Lock => "lock",
            Change::Write => "write",
            Change::Rollback => "roll back",
            Change::Import => "import",
            Change::Delete => "delete",
            Change::Restore => "restore onto",
        }
    }
}

impl Protection {
    /// Checks the rule's shape; whether its policies exist is the service's to check.
    ///
    /// # Errors
    /// `InvalidRequest` naming what is wrong.
    pub fn check(&self) -> Result<(), Refusal> {
        check_pattern(&self.pattern)?;
        if self.policies.is_empty() || self.policies.len() > MAX_POLICIES {
            return Err(Refusal::InvalidRequest {
                reason: format!(
                    "policies must name 1-{MAX_POLICIES} trust policies whose sessions may change the states {:?} matches",
                    self.pattern
                ),
            });
        }
        for policy in &self.policies {
            check_name("policy", policy)?;
        }
        Ok(())
    }

    /// The rule with its policies sorted and each named once, as it is stored and shown.
    pub fn normalized(mut self) -> Self {
        self.policies.sort();
        self.policies.dedup();
        self
    }

    pub fn matches(&self, state: &str) -> bool {
        glob(&self.pattern, state)
    }
}

/// The rules of `protections` that match state `name`, in their order.
pub fn protecting<'a>(protections: &'a [Protection], name: &str) -> Vec<&'a Protection> {
    protections.iter().filter(|p| p.matches(name)).collect()
}

/// Decides whether `principal` may `change` state `name`: only a workload session whose
/// policy every matching rule names may. Several rules matching is several conditions, all
/// to be met (a state under `prod-*` and `*-network` is changed only by a policy both name).
///
/// # Errors
/// `ProtectedState` naming the first rule the caller does not satisfy and its policies.
pub fn check_change(
    protections: &[Protection],
    name: &str,
    principal: &Principal,
    change: Change,
) -> Result<(), Refusal> {
    let policy = principal.session.as_ref().map(|s| s.policy.as_str());
    let unmet = protecting(protections, name)
        .into_iter()
        .find(|rule| !policy.is_some_and(|p| rule.policies.iter().any(|q| q == p)));
    match unmet {
        None => Ok(()),
        Some(rule) => Err(Refusal::ProtectedState {
            name: name.to_owned(),
            pattern: rule.pattern.clone(),
            policies: rule.policies.clone(),
            change: change.verb(),
            caller: match policy {
                Some(p) => format!("a session of trust policy {p}"),
                None => "this token".to_owned(),
            },
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::actor::{Actor, SessionGrant, WorkloadJob};
    use crate::domain::permission::Role;

    fn rule(pattern: &str, policies: &[&str]) -> Protection {
        Protection {
            pattern: pattern.into(),
            policies: policies.iter().map(|p| (*p).to_owned()).collect(),
        }
    }

    fn person(role: Role) -> Principal {
        Principal {
            org: "acme".into(),
            role,
            actor: Actor::User { user: "ann".into() },
            step: None,
            session: None,
        }
    }

    fn session(policy: &str) -> Principal {
        let at = time::OffsetDateTime::UNIX_EPOCH;
        Principal {
            session: Some(Box::new(SessionGrant {
                token_id: "t".into(),
                policy: policy.into(),
                policy_revision: String::new(),
                narrowed_to: None,
                states: vec!["*".into()],
                job: WorkloadJob::from_claims(&serde_json::Map::new()),
                expires_at: at,
                locks_live_until: at,
                token_hash: String::new(),
            })),
            ..person(Role::Operator)
        }
    }

    #[test]
    fn an_unprotected_state_is_changed_by_anyone_its_role_lets() {
        let rules = [rule("prod-*", &["deploy"])];
        for caller in [
            person(Role::Operator),
            person(Role::Admin),
            session("other"),
        ] {
            assert_eq!(
                check_change(&rules, "dev-net", &caller, Change::Write),
                Ok(())
            );
        }
        assert_eq!(
            check_change(&[], "prod-net", &person(Role::Admin), Change::Lock),
            Ok(())
        );
    }

    #[test]
    fn a_protected_state_is_changed_only_by_sessions_of_its_policies() {
        let rules = [rule("prod-*", &["deploy", "release"])];
        assert_eq!(
            check_change(&rules, "prod-net", &session("deploy"), Change::Lock),
            Ok(())
        );
        assert_eq!(
            check_change(&rules, "prod-net", &session("release"), Change::Delete),
            Ok(())
        );
        for caller in [
            person(Role::Operator),
            person(Role::Admin),
            session("review"),
        ] {
            let refusal = check_change(&rules, "prod-net", &caller, Change::Write).unwrap_err();
            let text = refusal.to_string();
            assert!(
                text.contains("prod-*")
                    && text.contains("deploy, release")
                    && text.contains("write"),
                "the refusal names the rule and its policies: {text}"
            );
        }
    }

    #[test]
    fn every_matching_rule_must_be_met() {
        let rules = [
            rule("prod-*", &["deploy", "network"]),
            rule("*-net", &["network"]),
        ];
        assert_eq!(
            check_change(&rules, "prod-net", &session("network"), Change::Write),
            Ok(())
        );
        let refusal = check_change(&rules, "prod-net", &session("deploy"), Change::Write);
        assert!(
            matches!(&refusal, Err(Refusal::ProtectedState { pattern, .. }) if pattern == "*-net"),
            "{refusal:?}"
        );
        assert_eq!(
            check_change(&rules, "prod-db", &session("deploy"), Change::Write),
            Ok(())
        );
    }

    #[test]
    fn a_rule_needs_a_valid_pattern_and_one_to_sixteen_policies() {
        assert_eq!(rule("prod-*", &["deploy"]).check(), Ok(()));
        assert_eq!(rule("exact-name", &["deploy"]).check(), Ok(()));
        for bad in [
            rule("prod/*", &["deploy"]),
            rule("", &["deploy"]),
            rule(".x*", &["deploy"]),
            rule("prod-*", &[]),
            rule("prod-*", &["no spaces"]),
        ] {
            assert!(bad.check().is_err(), "{bad:?}");
        }
        let many: Vec<String> = (0..=MAX_POLICIES).map(|i| format!("p{i}")).collect();
        let many: Vec<&str> = many.iter().map(String::as_str).collect();
        assert!(rule("x", &many).check().is_err());
    }

    #[test]
    fn policies_are_stored_sorted_and_once() {
        assert_eq!(
            rule("x", &["b", "a", "b"]).normalized().policies,
            vec!["a".to_owned(), "b".to_owned()]
        );
    }
}
