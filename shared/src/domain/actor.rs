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
            Actor::Cli => "the hegemony-state command".into(),
            Actor::Sweeper => "the sweeper".into(),
            Actor::Platform => "the platform".into(),
        }
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
}
