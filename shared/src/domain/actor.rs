//! Who is asking (a principal, from a token) and who did something (an actor, as recorded on
//! locks, versions and audit entries).

use serde::{Deserialize, Serialize};

use super::permission::Role;
use super::Timestamp;

/// Who holds a lock or wrote a version, as the pinned shapes show it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Actor {
    /// A person or script with a personal access token. A person's lock belongs to the
    /// (org, user) pair, so any of that user's tokens may release it.
    User { user: String },
    /// One attempt of one step of a run, through its step token.
    Step {
        run: String,
        step: String,
        attempt: u32,
    },
    /// A CI job (an OpenID Connect workload), through the session its ID token opened.
    Workload(Box<WorkloadJob>),
    /// The platform that runs flows, through its platform token.
    Platform,
    /// The sweeper, tidying what has expired.
    Sweeper,
    /// The `hegemony-state` command on the server's own machine (tokens, first start).
    Cli,
}

impl Actor {
    /// Short text for lock Info and logs: `user <u>`.
    pub fn describe(&self) -> String {
        match self {
            Actor::User { user } => format!("user {user}"),
            Actor::Step { run, step, attempt } => {
                format!("run {run} step {step} attempt {attempt}")
            }
            Actor::Workload(job) => job.describe(),
            Actor::Cli => "the hegemony-state command".into(),
            Actor::Sweeper => "the sweeper".into(),
            Actor::Platform => "the platform".into(),
        }
    }
}

/// The CI job behind a workload session, from its verified ID token's claims: who holds a
/// lock, wrote a version or did what the audit records. Claims the token lacks are left out.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
// Inlined in `Actor`'s schema, so the workload variant is one object with its `kind`, as the
// other variants are (a `$ref` beside `kind` is read as the reference alone by generators).
#[schemars(inline)]
pub struct WorkloadJob {
    pub issuer: String,
    pub subject: String,
    /// GitHub's `repository`, GitLab's `project_path`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repository: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub r#ref: Option<String>,
    /// GitHub's `run_id`, GitLab's `pipeline_id`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<String>,
    /// GitLab's `job_id`, GitHub's `workflow` (its ID tokens name no job).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job: Option<String>,
    /// GitHub's `run_attempt`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempt: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub environment: Option<String>,
}

impl WorkloadJob {
    /// The job, from a verified token's claims (GitHub's and GitLab's names both read).
    pub fn from_claims(claims: &serde_json::Map<String, serde_json::Value>) -> Self {
        let text = |names: &[&str]| {
            names.iter().find_map(|n| match claims.get(*n)? {
                serde_json::Value::String(s) if !s.is_empty() => Some(s.clone()),
                serde_json::Value::Number(n) => Some(n.to_string()),
                _ => None,
            })
        };
        WorkloadJob {
            issuer: text(&["iss"]).unwrap_or_default(),
            subject: text(&["sub"]).unwrap_or_default(),
            repository: text(&["repository", "project_path"]),
            r#ref: text(&["ref"]),
            run: text(&["run_id", "pipeline_id"]),
            job: text(&["job_id", "workflow"]),
            attempt: text(&["run_attempt"]),
            sha: text(&["sha"]),
            environment: text(&["environment"]),
        }
    }

    /// What Terraform prints of a lock's holder: which job, of which run, of which
    /// repository and ref, so the person waiting knows whom to wait for.
    pub fn describe(&self) -> String {
        let mut text = format!("CI job {}", self.job.as_deref().unwrap_or(&self.subject));
        let parts = [
            ("run", &self.run),
            ("attempt", &self.attempt),
            ("of", &self.repository),
            ("at", &self.r#ref),
            ("commit", &self.sha),
            ("environment", &self.environment),
        ];
        for (word, value) in parts {
            if let Some(value) = value {
                text.push_str(&format!(" {word} {value}"));
            }
        }
        format!("{text} (issuer {}, subject {})", self.issuer, self.subject)
    }
}

/// What a workload session token allows: the states its trust policy names, with the
/// policy's role, until it ends. Its locks live until the session's end plus the run-end
/// grace, as a step's do until its run's end plus the grace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionGrant {
    pub token_id: String,
    /// The trust policy that opened it.
    pub policy: String,
    /// That policy's revision when the session opened (`TrustPolicy::revision`), which each
    /// request compares with the policy as it stands: empty for a session opened before
    /// sessions recorded it.
    #[serde(default)]
    pub policy_revision: String,
    /// Set when the token is authenticated, never stored: the policy's state patterns as
    /// they stand now, when it was narrowed since the session opened (a state must match
    /// both these and `states`).
    #[serde(skip)]
    pub narrowed_to: Option<Vec<String>>,
    /// The policy's state name patterns, as they were when the session opened.
    pub states: Vec<String>,
    pub job: WorkloadJob,
    #[serde(with = "time::serde::rfc3339")]
    pub expires_at: Timestamp,
    /// When a lock the session takes stops being live: its end plus the run-end grace.
    #[serde(with = "time::serde::rfc3339")]
    pub locks_live_until: Timestamp,
    /// Set when the token is authenticated, never stored, as for a step's grant.
    #[serde(skip)]
    pub token_hash: String,
}

impl SessionGrant {
    /// The key its locks are found by, as a step's are by its run: one per session, so
    /// ending the session reaches exactly its own locks.
    pub fn run_key(&self) -> String {
        format!("session-{}", self.token_id)
    }

    pub fn allows_state(&self, name: &str) -> bool {
        super::trust::allows_state(&self.states, name)
            && self
                .narrowed_to
                .as_ref()
                .is_none_or(|now| super::trust::allows_state(now, name))
    }
}

/// Which part of a run a step token serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StepKind {
    Plan,
    Apply,
}

/// What a step token allows: the backend routes of one state, for one attempt of one step
/// of one run, until it expires.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepGrant {
    pub token_id: String,
    pub run: String,
    pub step: String,
    pub attempt: u32,
    pub state: String,
    pub kind: StepKind,
    /// A plan that holds the state for its run until the run's apply.
    pub hold: bool,
    #[serde(with = "time::serde::rfc3339")]
    pub expires_at: Timestamp,
    /// The hash of the token this grant was read from, set when the token is authenticated:
    /// a step's lock commits on its token being unrevoked still (`ports::StepCheck`). Never
    /// stored, as the token's own record is found by it.
    #[serde(skip)]
    pub token_hash: String,
}

/// The caller of a request, resolved from its token. The org always comes from here, never
/// from the URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    pub org: String,
    pub role: Role,
    pub actor: Actor,
    /// Set for a step token, which acts as operator within its grant.
    pub step: Option<StepGrant>,
    /// Set for a workload session, which acts with its policy's role on its states only.
    pub session: Option<Box<SessionGrant>>,
}
