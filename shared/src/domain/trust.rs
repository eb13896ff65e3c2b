//! Trust policies: which OpenID Connect workloads (CI jobs) an org lets in, with which role,
//! to which states and for how long (DESIGN section 16). Checking a policy, matching a
//! token's claims and state names against it, and the warnings an admin is shown. No I/O, no
//! clock, no status codes, no token verification (that is `crypto::id_token`'s).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::name::check_name;
use super::permission::Role;
use super::Refusal;

/// The longest session a policy may open, as for step tokens: 24 hours.
pub const MAX_SESSION_SECONDS: u64 = 86_400;

/// Claims that name a repository or project by a name that can be reused (renamed, deleted,
/// created again by someone else): a policy matching on these alone is warned about.
pub const NAME_CLAIMS: &[&str] = &["repository", "project_path"];

/// Claims that identify a repository, owner, project or group for good (GitHub's and
/// GitLab's numeric ids, never reused).
pub const IMMUTABLE_CLAIMS: &[&str] = &[
    "repository_id",
    "repository_owner_id",
    "project_id",
    "namespace_id",
];

/// The most claim conditions and state patterns one policy holds: enough for any CI system's
/// claims, small enough that matching stays cheap.
const MAX_CONDITIONS: usize = 32;
const MAX_PATTERNS: usize = 64;
const MAX_TEXT: usize = 512;

/// An org's trust policy, in the pinned shape of `/api/org/trust-policies`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TrustPolicy {
    pub name: String,
    /// The issuer, exactly as the tokens' `iss` claim writes it (an `https://` URL).
    pub issuer: String,
    /// The audience the token must carry in its `aud` claim.
    pub audience: String,
    /// Claim name -> exact value, or a pattern where `*` stands for any run of characters.
    pub claims: BTreeMap<String, String>,
    /// The role a session acts with: viewer or operator, never admin.
    pub role: Role,
    /// State name patterns (`*` for any run of characters) the session may reach.
    pub states: Vec<String>,
    /// The longest session the policy opens, and the longest ID token lifetime it takes.
    pub session_seconds: u64,
}

fn invalid(reason: String) -> Refusal {
    Refusal::InvalidRequest { reason }
}

/// Checks a piece of free text (an audience, a claim's value): printable, bounded.
fn check_text(what: &str, text: &str) -> Result<(), Refusal> {
    if text.is_empty() || text.chars().count() > MAX_TEXT || text.chars().any(char::is_control) {
        return Err(invalid(format!(
            "{what} must be 1-{MAX_TEXT} printable characters"
        )));
    }
    Ok(())
}

/// Checks an issuer: an `https://` URL with a host and nothing after its path, as tokens
/// carry it in `iss` (compared exactly, so no normalising here either).
fn check_issuer(issuer: &str) -> Result<(), Refusal> {
    let refuse = |why: &str| {
        Err(invalid(format!(
            "issuer {issuer:?} {why}: give the exact https:// URL the tokens carry in iss, e.g. https://token.actions.githubusercontent.com"
        )))
    };
    let Some(rest) = issuer.strip_prefix("https://") else {
        return refuse("is not an https:// URL");
    };
    let host = rest.split('/').next().unwrap_or("");
    if issuer.chars().count() > MAX_TEXT || host.is_empty() {
        return refuse("has no host");
    }
    if issuer
        .chars()
        .any(|c| c.is_whitespace() || c.is_control() || matches!(c, '?' | '#' | '@'))
    {
        return refuse("holds a space, a query, a fragment or credentials");
    }
    Ok(())
}

/// Checks a state name pattern: a state name in which `*` may stand for any run of
/// characters.
pub(crate) fn check_pattern(pattern: &str) -> Result<(), Refusal> {
    let sample = pattern.replace('*', "x");
    check_name("state", &sample).map_err(|refusal| match refusal {
        Refusal::InvalidName { reason, .. } => invalid(format!(
            "state pattern {pattern:?}: {reason} (and '*' for any run of characters)"
        )),
        other => other,
    })
}

impl TrustPolicy {
    /// Checks every field against the rules of DESIGN section 16.
    ///
    /// # Errors
    /// `InvalidName` for the name, `InvalidRequest` naming the first field that is wrong.
    pub fn check(&self) -> Result<(), Refusal> {
        check_name("policy", &self.name)?;
        check_issuer(&self.issuer)?;
        check_text("audience", &self.audience)?;
        if self.claims.len() > MAX_CONDITIONS {
            return Err(invalid(format!(
                "a policy holds at most {MAX_CONDITIONS} claim conditions"
            )));
        }
        for (claim, value) in &self.claims {
            let claim_ok = !claim.is_empty()
                && claim.len() <= 128
                && claim
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | ':'));
            if !claim_ok {
                return Err(invalid(format!(
                    "claim name {claim:?} must be 1-128 of A-Z a-z 0-9 _ - . :"
                )));
            }
            check_text(&format!("the value of claim {claim}"), value)?;
        }
        if self.role == Role::Admin {
            return Err(invalid(
                "a trust policy grants viewer or operator, never admin".into(),
            ));
        }
        if self.states.is_empty() || self.states.len() > MAX_PATTERNS {
            return Err(invalid(format!(
                "states must hold 1-{MAX_PATTERNS} state name patterns (\"*\" for every state)"
            )));
        }
        for pattern in &self.states {
            check_pattern(pattern)?;
        }
        if !(1..=MAX_SESSION_SECONDS).contains(&self.session_seconds) {
            return Err(invalid(format!(
                "session_seconds must be 1-{MAX_SESSION_SECONDS} (24 hours at most)"
            )));
        }
        Ok(())
    }

    /// What an admin should know about a valid policy: it matches a repository or project by
    /// name only (names can be reused by someone else), or it matches no claim at all.
    pub fn warnings(&self) -> Vec<String> {
        let mut warnings = Vec::new();
        let by_name: Vec<&str> = NAME_CLAIMS
            .iter()
            .copied()
            .filter(|c| self.claims.contains_key(*c))
            .collect();
        let by_id = IMMUTABLE_CLAIMS
            .iter()
            .any(|c| self.claims.contains_key(*c));
        if !by_name.is_empty() && !by_id {
            warnings.push(format!(
                "policy {} matches on {} by name only: a name can be taken again by someone else after a rename or a delete; add an immutable id condition ({})",
                self.name,
                by_name.join(" and "),
                IMMUTABLE_CLAIMS.join(", ")
            ));
        }
        if self.claims.is_empty() {
            warnings.push(format!(
                "policy {} has no claim conditions: every job of {} with audience {} is let in",
                self.name, self.issuer, self.audience
            ));
        }
        warnings
    }

    /// Whether the policy lets its sessions reach state `name`.
    pub fn allows_state(&self, name: &str) -> bool {
        allows_state(&self.states, name)
    }

    /// Checks a verified token's claims against the policy's conditions.
    ///
    /// # Errors
    /// The first condition that fails, named, with what the token carries (the token's
    /// claims are its holder's own; the token itself never appears).
    pub fn match_claims(&self, claims: &Map<String, Value>) -> Result<(), String> {
        for (claim, wanted) in &self.claims {
            match claims.get(claim).and_then(claim_text) {
                None => return Err(format!("the token has no {claim} claim")),
                Some(got) if glob(wanted, &got) => {}
                // What the policy wants is the org's to know, not the caller's.
                Some(got) => {
                    return Err(format!("claim {claim} is {got:?}, which it does not take"))
                }
            }
        }
        Ok(())
    }
}

/// Whether one of `patterns` matches state `name`.
pub fn allows_state(patterns: &[String], name: &str) -> bool {
    patterns.iter().any(|p| glob(p, name))
}

/// A claim's value as the text a condition compares: strings as they are, numbers and
/// booleans as JSON writes them (GitLab's `ref_protected` is the string "true", GitHub's
/// ids are strings, but another issuer may send numbers). Lists and objects match nothing.
fn claim_text(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Bool(_) | Value::Number(_) => Some(value.to_string()),
        _ => None,
    }
}

/// Whether `text` matches `pattern`, where `*` stands for any run of characters (none
/// included) and everything else for itself. Linear backtracking on the last star, so a
/// pattern with many stars cannot make matching blow up.
pub fn glob(pattern: &str, text: &str) -> bool {
    let (p, t): (Vec<char>, Vec<char>) = (pattern.chars().collect(), text.chars().collect());
    let (mut pi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ti));
            pi += 1;
        } else if pi < p.len() && p[pi] == t[ti] {
            pi += 1;
            ti += 1;
        } else if let Some((sp, st)) = star {
            pi = sp + 1;
            ti = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn github() -> TrustPolicy {
        TrustPolicy {
            name: "deploy".into(),
            issuer: "https://token.actions.githubusercontent.com".into(),
            audience: "https://state.example.com".into(),
            claims: BTreeMap::from([
                ("repository_id".into(), "123".into()),
                ("ref".into(), "refs/heads/main".into()),
                ("environment".into(), "prod*".into()),
            ]),
            role: Role::Operator,
            states: vec!["net-*".into(), "dns".into()],
            session_seconds: 3600,
        }
    }

    fn reason(policy: TrustPolicy) -> String {
        match policy.check() {
            Err(Refusal::InvalidRequest { reason }) | Err(Refusal::InvalidName { reason, .. }) => {
                reason
            }
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    #[test]
    fn a_github_policy_is_valid_and_not_warned_about() {
        assert_eq!(github().check(), Ok(()));
        assert!(github().warnings().is_empty());
    }

    #[test]
    fn the_issuer_is_an_exact_https_url() {
        for bad in [
            "http://token.actions.githubusercontent.com",
            "token.actions.githubusercontent.com",
            "https://",
            "https:///path",
            "https://a b",
            "https://host/?q=1",
            "https://user@host",
        ] {
            let policy = TrustPolicy {
                issuer: bad.into(),
                ..github()
            };
            assert!(reason(policy).contains("issuer"), "{bad}");
        }
        let gitlab = TrustPolicy {
            issuer: "https://gitlab.example.com/sub".into(),
            ..github()
        };
        assert_eq!(gitlab.check(), Ok(()));
    }

    #[test]
    fn admin_empty_audience_and_sessions_out_of_range_are_refused() {
        let admin = TrustPolicy {
            role: Role::Admin,
            ..github()
        };
        assert!(reason(admin).contains("never admin"));
        let audience = TrustPolicy {
            audience: String::new(),
            ..github()
        };
        assert!(reason(audience).contains("audience"));
        for seconds in [0, MAX_SESSION_SECONDS + 1] {
            let policy = TrustPolicy {
                session_seconds: seconds,
                ..github()
            };
            assert!(reason(policy).contains("session_seconds"), "{seconds}");
        }
        let longest = TrustPolicy {
            session_seconds: MAX_SESSION_SECONDS,
            ..github()
        };
        assert_eq!(longest.check(), Ok(()));
    }

    #[test]
    fn states_are_name_patterns_and_claims_have_plain_names() {
        let none = TrustPolicy {
            states: vec![],
            ..github()
        };
        assert!(reason(none).contains("states"));
        let slash = TrustPolicy {
            states: vec!["a/*".into()],
            ..github()
        };
        assert!(reason(slash).contains("state pattern \"a/*\""));
        let claim = TrustPolicy {
            claims: BTreeMap::from([("a b".into(), "x".into())]),
            ..github()
        };
        assert!(reason(claim).contains("claim name"));
        let empty_value = TrustPolicy {
            claims: BTreeMap::from([("ref".into(), String::new())]),
            ..github()
        };
        assert!(reason(empty_value).contains("claim ref"));
        let name = TrustPolicy {
            name: "a/b".into(),
            ..github()
        };
        assert!(reason(name).contains("policy name"));
    }

    #[test]
    fn a_policy_matching_names_only_is_warned_about() {
        let by_name = TrustPolicy {
            claims: BTreeMap::from([("repository".into(), "acme/net".into())]),
            ..github()
        };
        let warnings = by_name.warnings();
        assert_eq!(warnings.len(), 1);
        assert!(
            warnings[0].contains("repository by name only"),
            "{warnings:?}"
        );
        let with_id = TrustPolicy {
            claims: BTreeMap::from([
                ("project_path".into(), "acme/net".into()),
                ("project_id".into(), "42".into()),
            ]),
            ..github()
        };
        assert!(with_id.warnings().is_empty());
        let nothing = TrustPolicy {
            claims: BTreeMap::new(),
            ..github()
        };
        assert!(nothing.warnings()[0].contains("no claim conditions"));
    }

    #[test]
    fn claims_match_exactly_or_by_glob_and_a_missing_claim_fails() {
        let policy = github();
        let claims = |v: Value| v.as_object().unwrap().clone();
        let good = claims(json!({
            "repository_id": "123", "ref": "refs/heads/main", "environment": "production"
        }));
        assert_eq!(policy.match_claims(&good), Ok(()));
        let other_ref = claims(json!({
            "repository_id": "123", "ref": "refs/heads/feature", "environment": "production"
        }));
        assert!(policy
            .match_claims(&other_ref)
            .unwrap_err()
            .contains("claim ref"));
        let missing = claims(json!({"repository_id": "123", "ref": "refs/heads/main"}));
        assert_eq!(
            policy.match_claims(&missing),
            Err("the token has no environment claim".into())
        );
        let numeric = claims(json!({
            "repository_id": 123, "ref": "refs/heads/main", "environment": "prod"
        }));
        assert_eq!(policy.match_claims(&numeric), Ok(()));
        let list = claims(json!({
            "repository_id": ["123"], "ref": "refs/heads/main", "environment": "prod"
        }));
        assert!(policy.match_claims(&list).is_err());
    }

    #[test]
    fn globs_match_any_run_and_only_that() {
        assert!(glob("*", ""));
        assert!(glob("net-*", "net-"));
        assert!(glob("net-*", "net-prod"));
        assert!(!glob("net-*", "dns"));
        assert!(glob("a*b*c", "aXXbYYc"));
        assert!(!glob("a*b*c", "aXXbYY"));
        assert!(glob("refs/heads/*", "refs/heads/release/1"));
        assert!(!glob("exact", "exactly"));
        assert!(glob(&"*a".repeat(20), &"a".repeat(40)));
        assert!(!glob(&"*a".repeat(20), &"a".repeat(19)));
        assert!(github().allows_state("net-prod"));
        assert!(github().allows_state("dns"));
        assert!(!github().allows_state("dns2"));
    }
}
