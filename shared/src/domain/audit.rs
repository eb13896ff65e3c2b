//! The actions the audit log records, under the names operators filter on and read in
//! docs/managing-states.md. Names only: building and storing entries is the service's.

/// What an audit entry records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuditAction {
    /// A new version by a write; later saves folded into it add none.
    VersionCreated,
    StateImported,
    StateRolledBack,
    LockForceUnlocked,
    /// A lock past its time, taken over by the next change or cleared by the sweeper.
    LockExpired,
    StateDeleted,
    /// A deleted state brought back, under its name or a new one.
    StateRestored,
    /// A deleted state purged, by an admin or the sweeper once its retention passed: its
    /// versions are left to the sweeper, and it can no longer be restored.
    StatePurged,
    VersionDownloaded,
    /// Two versions compared (what changed between them): derived from content.
    VersionsCompared,
    PermissionsChanged,
    TokenCreated,
    TokenRevoked,
    StepTokenMinted,
    /// A state's versions moved to the key in use by `keys rewrap`.
    KeysRewrapped,
    /// An app state's change sealed: by a seal, an unlock or a force-unlock.
    AppSealed,
    AppForceUnlocked,
    AppArchiveDeleted,
    AppFileDownloaded,
    TrustPolicyCreated,
    TrustPolicyChanged,
    TrustPolicyDeleted,
    /// A protected-state rule set (created or changed) or removed.
    ProtectionSet,
    ProtectionRemoved,
    /// A workload's ID token exchanged for a session token under a trust policy.
    WorkloadSessionOpened,
    /// A workload session ended early by its job, its locks released.
    WorkloadSessionEnded,
    /// A record copied from another store by `hegemony-state migrate` (a token, a trust
    /// policy), or the migration's end, with what it copied.
    StoreMigrated,
}

impl AuditAction {
    pub const ALL: &'static [AuditAction] = &[
        AuditAction::VersionCreated,
        AuditAction::StateImported,
        AuditAction::StateRolledBack,
        AuditAction::LockForceUnlocked,
        AuditAction::LockExpired,
        AuditAction::StateDeleted,
        AuditAction::StateRestored,
        AuditAction::StatePurged,
        AuditAction::VersionDownloaded,
        AuditAction::VersionsCompared,
        AuditAction::PermissionsChanged,
        AuditAction::TokenCreated,
        AuditAction::TokenRevoked,
        AuditAction::StepTokenMinted,
        AuditAction::KeysRewrapped,
        AuditAction::AppSealed,
        AuditAction::AppForceUnlocked,
        AuditAction::AppArchiveDeleted,
        AuditAction::AppFileDownloaded,
        AuditAction::TrustPolicyCreated,
        AuditAction::TrustPolicyChanged,
        AuditAction::TrustPolicyDeleted,
        AuditAction::ProtectionSet,
        AuditAction::ProtectionRemoved,
        AuditAction::WorkloadSessionOpened,
        AuditAction::WorkloadSessionEnded,
        AuditAction::StoreMigrated,
    ];

    /// The name stored with the entry and used to filter the log.
    pub fn as_str(self) -> &'static str {
        match self {
            AuditAction::VersionCreated => "version.created",
            AuditAction::StateImported => "state.imported",
            AuditAction::StateRolledBack => "state.rolled_back",
            AuditAction::LockForceUnlocked => "lock.force_unlocked",
            AuditAction::LockExpired => "lock.expired",
            AuditAction::StateDeleted => "state.deleted",
            AuditAction::StateRestored => "state.restored",
            AuditAction::StatePurged => "state.purged",
            AuditAction::VersionDownloaded => "version.downloaded",
            AuditAction::VersionsCompared => "versions.compared",
            AuditAction::PermissionsChanged => "permissions.changed",
            AuditAction::TokenCreated => "token.created",
            AuditAction::TokenRevoked => "token.revoked",
            AuditAction::StepTokenMinted => "step_token.minted",
            AuditAction::KeysRewrapped => "keys.rewrapped",
            AuditAction::AppSealed => "app.sealed",
            AuditAction::AppForceUnlocked => "app.force_unlocked",
            AuditAction::AppArchiveDeleted => "app.archive_deleted",
            AuditAction::AppFileDownloaded => "app.file_downloaded",
            AuditAction::TrustPolicyCreated => "trust_policy.created",
            AuditAction::TrustPolicyChanged => "trust_policy.changed",
            AuditAction::TrustPolicyDeleted => "trust_policy.deleted",
            AuditAction::ProtectionSet => "protection.set",
            AuditAction::ProtectionRemoved => "protection.removed",
            AuditAction::WorkloadSessionOpened => "workload.session_opened",
            AuditAction::WorkloadSessionEnded => "workload.session_ended",
            AuditAction::StoreMigrated => "store.migrated",
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    /// The actions docs/managing-states.md lists in its audit section: every backticked
    /// `kind.verb` there.
    fn documented() -> BTreeSet<String> {
        include_str!("../../../docs/managing-states.md")
            .split("\n## ")
            .find(|section| section.starts_with("The audit log"))
            .expect("docs/managing-states.md has an audit section")
            .split('`')
            .skip(1)
            .step_by(2)
            .filter(|word| {
                word.split_once('.').is_some_and(|(kind, verb)| {
                    [kind, verb].iter().all(|part| {
                        !part.is_empty() && part.chars().all(|c| c.is_ascii_lowercase() || c == '_')
                    })
                })
            })
            .map(str::to_owned)
            .collect()
    }

    /// docs/managing-states.md is the list of actions operators filter the log on: every
    /// action is documented there, and every action documented there is recorded.
    #[test]
    fn the_actions_are_exactly_those_documented() {
        let recorded: BTreeSet<String> = AuditAction::ALL
            .iter()
            .map(|a| a.as_str().to_owned())
            .collect();
        assert_eq!(
            recorded.len(),
            AuditAction::ALL.len(),
            "an action is listed twice"
        );
        assert_eq!(recorded, documented());
    }
}
