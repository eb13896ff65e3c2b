//! Who is asking (a principal, from a token) and who did something (an actor, as recorded on
//! locks, versions and audit entries).

use serde::{Deserialize, Serialize};

use super::permission::Role;

/// Who holds a lock or wrote a version, as the pinned shapes show it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Actor {
    /// A person or script with a personal access token. A person's lock belongs to the
    /// (org, user) pair, so any of that user's tokens may release it.
    User { user: String },
    /// The `hegemony-state` command on the server's own machine (tokens, first start).
    Cli,
}

impl Actor {
    /// Short text for lock Info and logs: `user <u>`.
    pub fn describe(&self) -> String {
        match self {
            Actor::User { user } => format!("user {user}"),
            Actor::Cli => "the hegemony-state command".into(),
        }
    }
}

/// The caller of a request, resolved from its token. The org always comes from here, never
/// from the URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    pub org: String,
    pub role: Role,
    pub actor: Actor,
}

impl Principal {
    /// Whether this caller is the holder recorded as `holder`.
    pub fn is(&self, holder: &Actor) -> bool {
        &self.actor == holder
    }
}
