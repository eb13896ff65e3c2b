//! Why the domain refuses a request. Each refusal is an expected outcome with a message a
//! person can act on; the http layer alone decides its status code and error code.

/// A refused request, decided by a domain rule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("invalid {kind} name: {reason}")]
    InvalidName { kind: &'static str, reason: String },

    #[error("the request body is larger than the limit of {limit} bytes")]
    BodyTooLarge { limit: u64 },

    /// `lock_id` is the ID the body named, when one could be read, for the log.
    #[error("invalid lock document: {reason}")]
    InvalidLock {
        reason: String,
        lock_id: Option<String>,
    },

    #[error("invalid unlock request: {reason}")]
    InvalidUnlock { reason: String },

    /// Someone else's live lock stands in the way; `document` is the holder's stored lock
    /// document, which the client reads back. `requested` is the lock ID the refused request
    /// named, if any, for the log.
    #[error("the state is locked by {holder} (lock ID {lock_id})")]
    Locked {
        lock_id: String,
        holder: String,
        document: String,
        requested: Option<String>,
    },

    /// A request named a lock ID that is not the current lock's.
    #[error("{}", lock_id_mismatch(given, current.as_deref()))]
    LockIdMismatch {
        given: String,
        current: Option<String>,
    },

    #[error("the body is not a Terraform or OpenTofu state: {reason}")]
    NotAState { reason: String },

    #[error(
        "state from another configuration: its lineage is {given}, the stored state's is {stored}"
    )]
    LineageMismatch { stored: String, given: String },

    #[error("stale state: serial {given} is older than the stored serial {stored}; pull the state and plan again")]
    StaleSerial { stored: u64, given: u64 },

    #[error("fork: serial {serial} is already stored with different content (two writers from one base); pull the state and plan again")]
    Fork { serial: u64 },

    #[error("permission denied: {reason}")]
    Forbidden { reason: String },

    #[error("{what} not found")]
    NotFound { what: String },

    #[error("state {name} already has a version: an import only creates a state; delete it first, or write a new version with `terraform state push`")]
    StateExists { name: String },

    #[error("trust policy {name} exists already: change it with PUT /api/org/trust-policies/{name}, or pick another name")]
    PolicyExists { name: String },

    /// The org holds the most trust policies there may be: its state refuses a new one, not
    /// the policy itself.
    #[error("the org holds {held} trust policies, the most there may be ({max}): remove one, or widen one's conditions (** in a claim pattern) or its states")]
    PolicyLimit { held: usize, max: usize },

    /// More than one trust policy of the org lets a job's ID token in, and the exchange named
    /// none: picking one by name would let a broad policy shadow a narrow one.
    #[error("trust policies {} all let this job in: name the one to use (\"policy\" in the exchange body, or hegemony-state login --oidc --policy NAME)", policies.join(", "))]
    AmbiguousPolicy { policies: Vec<String> },

    /// The issuer and audience pair of a trust policy is another org's: the org of a
    /// workload comes from the pair, so it belongs to one org only.
    #[error("another org's trust policies use issuer {issuer} with audience {audience}: an issuer and audience pair belongs to one org; give your policies an audience of your own (the CI job asks for it when it requests its ID token)")]
    TrustPairTaken { issuer: String, audience: String },

    /// A protection (`domain::protection`) lets only sessions of some trust policies change
    /// the state.
    #[error("state {name} is protected by rule {pattern:?}: only CI sessions of trust policies {} may {change} it, and {caller} is not one", policies.join(", "))]
    ProtectedState {
        name: String,
        pattern: String,
        policies: Vec<String>,
        change: &'static str,
        caller: String,
    },

    #[error("state {name} exists: a deleted state comes back only under a free name; restore it under another name (`{{\"name\": \"<new name>\"}}`), or delete state {name} first")]
    NameTaken { name: String },

    #[error("version {version} is OpenTofu-encrypted: its serial cannot be raised without OpenTofu's key, so it cannot be rolled back here; download it and push it with `tofu state push` instead")]
    RollbackEncrypted { version: u64 },

    #[error("state {name} is at serial {serial}, the largest there is: a rollback cannot raise it, so clients holding the current state could overwrite the rollback; download the version you want and import it under a new name instead")]
    SerialExhausted { name: String, serial: u64 },

    /// A version whose content the comparison of versions cannot read.
    #[error("version {version} cannot be compared: {reason}")]
    CannotCompare { version: u64, reason: String },

    /// A version whose outputs cannot be read here.
    #[error("the outputs of version {version} cannot be read: {reason}")]
    OutputsUnreadable { version: u64, reason: String },

    #[error("invalid request: {reason}")]
    InvalidRequest { reason: String },

    #[error("managed state is refused for run steps: {reason}")]
    PermissionNotAllocated { reason: String },

    #[error("run {run} has ended: no more step tokens are minted for it")]
    RunEnded { run: String },

    #[error("run {run} belongs to another organization")]
    RunOrgMismatch { run: String },

    /// An app state's file name outside the rules of docs/octo.md.
    #[error("invalid file name: {reason}")]
    InvalidFileName { reason: String },

    /// An app state's file that must be JSON and is not.
    #[error("{name} is not JSON: {reason}")]
    NotJson { name: String, reason: String },

    /// Someone else holds an app state's lock; `lock` is shown with the refusal.
    #[error("app state {app} is locked by {holder}")]
    AppLocked {
        app: String,
        lock: Box<crate::domain::app::PublicLock>,
        holder: String,
    },

    /// An upload past an archive's files or a change's bytes.
    #[error("the change is too large: {reason}")]
    ChangeTooLarge { reason: String },

    /// The newest archive is an app state's sealed state.
    #[error("archive {commit_id} is the newest: it is the sealed state every reader reads, so it is never deleted; delete older archives, or seal a newer change first")]
    NewestArchive { commit_id: String },

    /// Releasing a lock the caller does not hold is a force unlock.
    #[error("the lock is held by {holder}; releasing someone else's lock is a force unlock, which needs tf_state:manage")]
    NotYourLock { holder: String, lock_id: String },
}

/// Said the same for a Terraform state and an app state, so it names neither.
fn lock_id_mismatch(given: &str, current: Option<&str>) -> String {
    match current {
        Some(current) => {
            format!("lock ID {given} is not the current lock; the lock held now has ID {current}")
        }
        None => format!(
            "lock ID {given} is not held: nothing is locked (the lock was released or taken away)"
        ),
    }
}

impl Refusal {
    /// The lock IDs a refusal involves, for the WARNING log line: the one the request named
    /// first, then the one in its way.
    pub fn lock_ids(&self) -> Vec<&str> {
        match self {
            Refusal::InvalidLock { lock_id, .. } => lock_id.as_deref().into_iter().collect(),
            Refusal::Locked {
                lock_id, requested, ..
            } => {
                let mut ids: Vec<&str> = requested.as_deref().into_iter().collect();
                if requested.as_deref() != Some(lock_id) {
                    ids.push(lock_id);
                }
                ids
            }
            Refusal::NotYourLock { lock_id, .. } => vec![lock_id],
            Refusal::LockIdMismatch { given, current } => {
                let mut ids = vec![given.as_str()];
                ids.extend(current.as_deref());
                ids
            }
            _ => Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lock_id_mismatch_names_both_ids_and_no_kind_of_state() {
        let held = Refusal::LockIdMismatch {
            given: "old".into(),
            current: Some("new".into()),
        }
        .to_string();
        assert!(held.contains("old") && held.contains("new"), "{held}");
        let none = Refusal::LockIdMismatch {
            given: "old".into(),
            current: None,
        }
        .to_string();
        assert!(none.contains("nothing is locked"), "{none}");
        assert!(
            !held.contains("state") && !none.contains("state"),
            "{held} / {none}"
        );
    }
}
