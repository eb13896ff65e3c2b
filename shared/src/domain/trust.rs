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

/// Claims that name a repository, owner, project, group or workflow by a name that can be
/// reused (renamed, deleted, created again by someone else), or that carry such a name
/// (`sub`, `job_workflow_ref`): a policy matching on these alone is warned about.
pub const NAME_CLAIMS: &[&str] = &[
    "repository",
    "project_path",
    "sub",
    "repository_owner",
    "namespace_path",
    "job_workflow_ref",
];

/// The shared issuers whose tokens every customer of theirs can mint: on these, a policy
/// must name the owner by an id that is never reused, so no other account's jobs match it.
/// Each issuer with the claims one of which a policy must hold exactly.
pub const SHARED_ISSUERS: &[(&str, &[&str])] = &[
    (
        "https://token.actions.githubusercontent.com",
        &["repository_owner_id", "repository_id"],
    ),
    ("https://gitlab.com", &["namespace_id", "project_id"]),
];

/// The most trust policies one org holds: enough for every pipeline of a large org, few
/// enough that the exchange reads an issuer's policies cheaply.
pub const MAX_POLICIES_PER_ORG: usize = 50;

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
    /// Claim name -> exact value, or a pattern where `*` stands for any run of characters
    /// but `/` and `:` (inside one segment of a path or a `sub`), and `**` for any run.
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
    // In bytes, as a token's `iss` is bounded (and a store's key).
    if issuer.len() > MAX_TEXT || host.is_empty() {
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

    /// The rules that hold a policy to its org on a shared deployment, checked when a policy
    /// is created or its audience, issuer or claims change (policies made before these rules
    /// keep working, warned about by [`TrustPolicy::warnings`]):
    ///
    /// - its audience ends with `/<org>`, so no other org can claim the audience this org's
    ///   jobs ask for and receive them;
    /// - on a shared issuer ([`SHARED_ISSUERS`]) it holds an owner or repository id condition
    ///   exactly, so no other customer's jobs match it.
    ///
    /// # Errors
    /// `InvalidRequest` naming the rule.
    pub fn check_for_org(&self, org: &str) -> Result<(), Refusal> {
        if !audience_names_org(&self.audience, org) {
            return Err(invalid(format!(
                "the audience {:?} must end with /{org}, the org's name (for example https://state.example.com/orgs/{org}), so no other org on this deployment can take the audience your jobs ask for",
                self.audience
            )));
        }
        if let Some(ids) = self.missing_owner_id() {
            return Err(invalid(format!(
                "a policy on the shared issuer {} must hold an exact condition on {}: names can be taken by anyone on that issuer, ids cannot",
                self.issuer,
                ids.join(" or ")
            )));
        }
        Ok(())
    }

    /// On a shared issuer, the id claims of which the policy holds no exact condition.
    fn missing_owner_id(&self) -> Option<&'static [&'static str]> {
        let (_, ids) = SHARED_ISSUERS
            .iter()
            .find(|(issuer, _)| *issuer == self.issuer)?;
        let held = ids
            .iter()
            .any(|id| self.claims.get(*id).is_some_and(|v| !v.contains('*')));
        (!held).then_some(*ids)
    }

    /// Whether a change from `old` to `self` must meet [`TrustPolicy::check_for_org`]: a new
    /// policy, or one whose issuer, audience or claims change (a legacy policy keeps its
    /// audience while its states, role or session length are edited).
    pub fn needs_org_check(&self, old: Option<&TrustPolicy>) -> bool {
        old.is_none_or(|old| {
            (&old.issuer, &old.audience, &old.claims)
                != (&self.issuer, &self.audience, &self.claims)
        })
    }

    /// The revision of whom the policy lets in: a digest of its issuer, audience and
    /// claims, recorded by each session it opens. A session whose policy's revision moved
    /// has ended; one whose policy changed only its states, role or session length is
    /// narrowed to what the policy allows now, read on each request.
    pub fn revision(&self) -> String {
        use sha2::{Digest, Sha256};
        // Serialising strings and a BTreeMap cannot fail, and gives the same text for the
        // same conditions (the map is ordered).
        let text = serde_json::to_vec(&(&self.issuer, &self.audience, &self.claims))
            .expect("strings and a map serialise");
        crate::ids::hex(&Sha256::digest(&text)[..12])
    }

    /// For a policy of `org` made before the rules of [`TrustPolicy::check_for_org`] and
    /// breaking one: what the admin is told when the org's policies are listed.
    pub fn legacy_warning(&self, org: &str) -> Option<String> {
        match self.check_for_org(org) {
            Err(Refusal::InvalidRequest { reason }) => Some(format!(
                "policy {} was made before a rule it breaks, and keeps working until its issuer, audience or claims are changed: {reason}",
                self.name
            )),
            _ => None,
        }
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
                Some(got) if claim_glob(wanted, &got) => {}
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

/// Whether an audience names `org` as its last path segment.
fn audience_names_org(audience: &str, org: &str) -> bool {
    audience
        .strip_suffix(org)
        .is_some_and(|rest| rest.ends_with('/'))
}

/// Whether a claim's `text` matches a condition's `pattern`: `**` stands for any run of
/// characters, `*` for any run without `/` or `:` (so `repo:acme/*` cannot reach
/// `repo:acme/net:ref:...` of another segment, nor `acme/*` a nested project), and
/// everything else for itself. Dynamic programming over (pattern, text) positions: no
/// pattern can make it blow up, and both are bounded (a condition by its 512 characters, a
/// claim by the ID token's 16 KiB).
pub fn claim_glob(pattern: &str, text: &str) -> bool {
    #[derive(Clone, Copy, PartialEq)]
    enum Piece {
        Char(char),
        Segment,
        Any,
    }
    let mut pieces = Vec::new();
    let mut chars = pattern.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '*' {
            if chars.peek() == Some(&'*') {
                while chars.peek() == Some(&'*') {
                    chars.next();
                }
                pieces.push(Piece::Any);
            } else {
                pieces.push(Piece::Segment);
            }
        } else {
            pieces.push(Piece::Char(c));
        }
    }
    let text: Vec<char> = text.chars().collect();
    // row[j]: whether the pieces so far match the first j characters of the text.
    let mut row = vec![false; text.len() + 1];
    row[0] = true;
    for piece in pieces {
        let mut next = vec![false; text.len() + 1];
        match piece {
            Piece::Char(c) => {
                for j in 1..=text.len() {
                    next[j] = row[j - 1] && text[j - 1] == c;
                }
            }
            Piece::Any | Piece::Segment => {
                next[0] = row[0];
                for j in 1..=text.len() {
                    let crosses = piece == Piece::Segment && matches!(text[j - 1], '/' | ':');
                    next[j] = row[j] || (next[j - 1] && !crosses);
                }
            }
        }
        row = next;
    }
    row[text.len()]
}

/// Whether `text` matches `pattern`, where `*` stands for any run of characters (none
/// included) and everything else for itself: state name patterns, whose names hold neither
/// `/` nor `:`. Linear backtracking on the last star, so a
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

    #[test]
    fn a_claim_star_stays_inside_a_segment_and_a_double_star_crosses() {
        assert!(claim_glob("repo:acme/*", "repo:acme/net"));
        assert!(!claim_glob(
            "repo:acme/*",
            "repo:acme/net:ref:refs/heads/main"
        ));
        assert!(claim_glob(
            "repo:acme/**",
            "repo:acme/net:ref:refs/heads/main"
        ));
        assert!(!claim_glob("acme/*", "acme/group/net"));
        assert!(claim_glob("acme/**", "acme/group/net"));
        assert!(claim_glob("refs/heads/release-*", "refs/heads/release-1"));
        assert!(!claim_glob("refs/heads/*", "refs/heads/release/1"));
        assert!(claim_glob("*", "main"));
        assert!(!claim_glob("*", "a:b"));
        assert!(claim_glob("**", ""));
        assert!(claim_glob("exact", "exact"));
        assert!(!claim_glob("exact", "exactly"));
        assert!(claim_glob(&"*a".repeat(20), &"a".repeat(40)));
        assert!(!claim_glob(&"*a".repeat(20), &"a".repeat(19)));
        let policy = TrustPolicy {
            claims: BTreeMap::from([("sub".into(), "repo:acme/*".into())]),
            ..github()
        };
        let claims = json!({"sub": "repo:acme/net:environment:production"});
        assert!(policy
            .match_claims(claims.as_object().unwrap())
            .unwrap_err()
            .contains("claim sub"));
    }

    #[test]
    fn a_new_policys_audience_names_its_org_and_a_shared_issuer_needs_an_owner_id() {
        let acme = TrustPolicy {
            audience: "https://state.example.com/orgs/acme".into(),
            ..github()
        };
        assert_eq!(acme.check_for_org("acme"), Ok(()));
        let reason = |policy: &TrustPolicy, org: &str| match policy.check_for_org(org) {
            Err(Refusal::InvalidRequest { reason }) => reason,
            other => panic!("expected a refusal, got {other:?}"),
        };
        assert!(reason(&acme, "other").contains("must end with /other"));
        assert!(reason(&github(), "acme").contains("must end with /acme"));
        let suffix_only = TrustPolicy {
            audience: "https://state.example.com/notacme".into(),
            ..github()
        };
        assert!(reason(&suffix_only, "acme").contains("must end with /acme"));
        let on_github = TrustPolicy {
            issuer: "https://token.actions.githubusercontent.com".into(),
            claims: BTreeMap::from([("repository".into(), "acme/net".into())]),
            ..acme.clone()
        };
        let why = reason(&on_github, "acme");
        assert!(
            why.contains("repository_owner_id or repository_id"),
            "{why}"
        );
        let glob_id = TrustPolicy {
            claims: BTreeMap::from([("repository_owner_id".into(), "*".into())]),
            ..on_github.clone()
        };
        assert!(glob_id.check_for_org("acme").is_err());
        let owner = TrustPolicy {
            claims: BTreeMap::from([("repository_owner_id".into(), "77".into())]),
            ..on_github.clone()
        };
        assert_eq!(owner.check_for_org("acme"), Ok(()));
        let on_gitlab = TrustPolicy {
            issuer: "https://gitlab.com".into(),
            claims: BTreeMap::from([("project_path".into(), "acme/net".into())]),
            ..acme.clone()
        };
        assert!(reason(&on_gitlab, "acme").contains("namespace_id or project_id"));
        let self_managed = TrustPolicy {
            issuer: "https://gitlab.acme.example".into(),
            ..on_gitlab
        };
        assert_eq!(self_managed.check_for_org("acme"), Ok(()));
    }

    #[test]
    fn a_policy_made_before_the_org_rules_keeps_working_and_is_warned_about() {
        let legacy = github();
        assert!(legacy
            .legacy_warning("acme")
            .unwrap()
            .contains("made before a rule it breaks"));
        let edited = TrustPolicy {
            states: vec!["*".into()],
            ..legacy.clone()
        };
        assert!(!edited.needs_org_check(Some(&legacy)));
        let moved = TrustPolicy {
            audience: "https://other.example".into(),
            ..legacy.clone()
        };
        assert!(moved.needs_org_check(Some(&legacy)));
        assert!(legacy.needs_org_check(None));
        let current = TrustPolicy {
            audience: "https://state.example.com/acme".into(),
            ..legacy
        };
        assert_eq!(current.legacy_warning("acme"), None);
    }

    #[test]
    fn the_revision_moves_with_whom_a_policy_lets_in_only() {
        let policy = github();
        let wider = TrustPolicy {
            states: vec!["*".into()],
            role: Role::Viewer,
            session_seconds: 60,
            ..github()
        };
        assert_eq!(policy.revision(), wider.revision());
        let other_claims = TrustPolicy {
            claims: BTreeMap::from([("repository_id".into(), "124".into())]),
            ..github()
        };
        assert_ne!(policy.revision(), other_claims.revision());
        let other_audience = TrustPolicy {
            audience: "https://x.example/acme".into(),
            ..github()
        };
        assert_ne!(policy.revision(), other_audience.revision());
    }
}
