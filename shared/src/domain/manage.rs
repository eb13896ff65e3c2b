//! The management rules: import, rollback, delete, force unlock, and which of them a caller
//! may do now. No I/O, no status codes.

use serde::Serialize;

use super::permission::{Allocation, Permission, Role};
use super::record::StateRecord;
use super::version::VersionRecord;
use super::{Principal, Refusal, Timestamp};

fn not_found(name: &str) -> Refusal {
    Refusal::NotFound {
        what: format!("state {name}"),
    }
}

/// Decides an import: the version number it creates.
///
/// # Errors
/// `Locked` while a lock is live; `StateExists` when the name has a version.
pub fn check_import(record: &StateRecord, now: Timestamp) -> Result<u64, Refusal> {
    if let Some(lock) = record.live_lock(now) {
        return Err(lock.refusal(None));
    }
    if let Some(hold) = &record.hold {
        return Err(hold.refusal(None));
    }
    if record.latest.is_some() {
        return Err(Refusal::StateExists {
            name: record.name.clone(),
        });
    }
    Ok(record.next_version)
}

/// A rollback decided: the new version's number and serial, and the version whose content
/// it makes current again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RollbackPlan {
    pub version: u64,
    pub serial: u64,
    pub target: VersionRecord,
}

/// Decides a rollback to `target` (the version asked for, if it exists).
///
/// # Errors
/// `NotFound` for a state or version that does not exist (or was pruned); `Locked` while a
/// lock is live; `RollbackEncrypted` for an OpenTofu-encrypted target; `SerialExhausted` when
/// the serial is already the largest there is and cannot be raised.
pub fn check_rollback(
    record: &StateRecord,
    requested: u64,
    target: Option<VersionRecord>,
    now: Timestamp,
) -> Result<RollbackPlan, Refusal> {
    if !record.is_visible() {
        return Err(not_found(&record.name));
    }
    if let Some(lock) = record.live_lock(now) {
        return Err(lock.refusal(None));
    }
    if let Some(hold) = &record.hold {
        return Err(hold.refusal(None));
    }
    let target = target.ok_or_else(|| Refusal::NotFound {
        what: format!("version {requested} of state {}", record.name),
    })?;
    if target.opentofu_encrypted {
        return Err(Refusal::RollbackEncrypted {
            version: target.version,
        });
    }
    // Above the current serial, so clients holding the pre-rollback state are refused as
    // stale or forked, and a plan saved before the rollback is refused as stale.
    // The newest serial carried, should the latest version be a bare encrypted document.
    let current = record
        .checked_serial()
        .into_iter()
        .chain(target.serial)
        .max()
        .unwrap_or(0);
    let serial = current
        .checked_add(1)
        .ok_or_else(|| Refusal::SerialExhausted {
            name: record.name.clone(),
            serial: current,
        })?;
    Ok(RollbackPlan {
        version: record.next_version,
        serial,
        target,
    })
}

/// Decides a delete.
///
/// # Errors
/// `NotFound` for a state that does not exist; `Locked` while a lock is live.
pub fn check_delete(record: &StateRecord, now: Timestamp) -> Result<(), Refusal> {
    if !record.is_visible() {
        return Err(not_found(&record.name));
    }
    if let Some(lock) = record.live_lock(now) {
        return Err(lock.refusal(None));
    }
    if let Some(hold) = &record.hold {
        return Err(hold.refusal(None));
    }
    Ok(())
}

/// The record a delete stores: a tombstone keeping the version counter.
pub fn tombstone(record: &StateRecord, now: Timestamp) -> StateRecord {
    let mut state = record.successor();
    state.lock = None;
    state.latest = None;
    state.deleted_at = Some(now);
    state
}

/// What the caller may do to one state now, so a page never hard-codes permissions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct AllowedActions {
    pub download: bool,
    /// Read its outputs (never a sensitive value), and the document a consumer's
    /// `terraform_remote_state` reads.
    pub outputs: bool,
    pub import: bool,
    pub rollback: bool,
    pub force_unlock: bool,
    pub delete: bool,
}

/// The actions `principal` may take on `record` at `now`: its permissions, and the state's
/// condition (roll back and delete are not available while the state is locked).
pub fn allowed_actions(
    record: &StateRecord,
    principal: &Principal,
    allocation: &Allocation,
    now: Timestamp,
) -> AllowedActions {
    let may = |p: Permission| allocation.allows(principal.role, p);
    let locked = record.live_lock(now).is_some() || record.hold.is_some();
    let written = record.is_visible();
    AllowedActions {
        download: written && may(Permission::Read),
        outputs: written && may(Permission::Outputs),
        import: !written && !locked && may(Permission::Write),
        rollback: written && !locked && may(Permission::Write),
        force_unlock: locked && may(Permission::Manage),
        delete: written && !locked && may(Permission::Manage),
    }
}

/// What the caller may do in its org, before any one state's condition: the pages offer
/// an action (and the admin pages) only where this allows it, and a state's page narrows it
/// further with that state's [`AllowedActions`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct OrgActions {
    pub download: bool,
    /// Read states' outputs.
    pub outputs: bool,
    pub import: bool,
    pub rollback: bool,
    pub force_unlock: bool,
    pub delete: bool,
    /// Read the audit log (the admin role, whatever the allocation).
    pub audit: bool,
    /// Read and change the allocation (the admin role, whatever the allocation).
    pub permissions: bool,
}

/// The actions `principal`'s role allows under `allocation`, on a state in a condition that
/// permits each: the same permissions [`allowed_actions`] checks, without a state.
pub fn org_actions(principal: &Principal, allocation: &Allocation) -> OrgActions {
    let may = |p: Permission| allocation.allows(principal.role, p);
    let admin = principal.role == Role::Admin;
    OrgActions {
        download: may(Permission::Read),
        outputs: may(Permission::Outputs),
        import: may(Permission::Write),
        rollback: may(Permission::Write),
        force_unlock: may(Permission::Manage),
        delete: may(Permission::Manage),
        audit: admin,
        permissions: admin,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::lock::parse_lock;
    use crate::domain::locking::{decide_lock, LockDecision};
    use crate::domain::Actor;
    use time::macros::datetime;

    const NOW: Timestamp = datetime!(2026-11-30 01:00:00 UTC);

    fn who(role: Role) -> Principal {
        Principal {
            session: None,
            org: "acme".into(),
            role,
            actor: Actor::User {
                user: "alice".into(),
            },
            step: None,
        }
    }

    fn version(n: u64, serial: u64, encrypted: bool) -> VersionRecord {
        VersionRecord {
            serial: Some(serial),
            opentofu_encrypted: encrypted,
            ..crate::domain::version::test_record(n, NOW)
        }
    }

    fn written(serial: u64) -> StateRecord {
        let mut r = StateRecord::fresh("acme", "net", "inc", NOW);
        r.latest = Some(version(3, serial, false));
        r.next_version = 4;
        r.revision = 3;
        r
    }

    fn locked(mut r: StateRecord) -> StateRecord {
        let doc = parse_lock(br#"{"ID":"L"}"#).unwrap();
        let LockDecision::Granted(lock) = decide_lock(&r, doc, &who(Role::Operator), NOW).unwrap()
        else {
            panic!()
        };
        r.lock = Some(*lock);
        r
    }

    #[test]
    fn an_import_creates_only_a_new_state() {
        let fresh = StateRecord::fresh("acme", "net", "inc", NOW);
        assert_eq!(check_import(&fresh, NOW), Ok(1));
        assert!(matches!(
            check_import(&written(5), NOW),
            Err(Refusal::StateExists { .. })
        ));
        assert!(matches!(
            check_import(&locked(fresh), NOW),
            Err(Refusal::Locked { .. })
        ));
    }

    #[test]
    fn a_hold_refuses_import_rollback_and_delete() {
        let hold = crate::domain::hold::Hold {
            run: "r1".into(),
            since: NOW,
        };
        let mut fresh = StateRecord::fresh("acme", "net", "inc", NOW);
        fresh.hold = Some(hold.clone());
        assert!(
            matches!(check_import(&fresh, NOW), Err(Refusal::Locked { ref lock_id, .. }) if lock_id == "hold-r1")
        );
        let mut held = written(9);
        held.hold = Some(hold);
        assert!(matches!(
            check_rollback(&held, 1, Some(version(1, 2, false)), NOW),
            Err(Refusal::Locked { .. })
        ));
        assert!(matches!(
            check_delete(&held, NOW),
            Err(Refusal::Locked { .. })
        ));
    }

    #[test]
    fn a_rollback_gets_the_next_version_and_a_serial_above_the_current() {
        let r = written(9);
        let plan = check_rollback(&r, 1, Some(version(1, 2, false)), NOW).unwrap();
        assert_eq!(
            plan,
            RollbackPlan {
                version: 4,
                serial: 10,
                target: version(1, 2, false)
            }
        );
    }

    #[test]
    fn a_rollback_over_a_bare_encrypted_version_rises_above_the_serial_carried_before_it() {
        let mut r = written(9);
        let mut bare = version(3, 0, true);
        bare.serial = None;
        bare.lineage = None;
        r.latest = Some(bare);
        r.carried.serial = Some(9);
        let plan = check_rollback(&r, 1, Some(version(1, 2, false)), NOW).unwrap();
        assert_eq!(plan.serial, 10);
    }

    /// Wrapping to 0 would let every stale client's write in over the rollback.
    #[test]
    fn a_rollback_at_the_largest_serial_is_refused_not_wrapped() {
        assert_eq!(
            check_rollback(&written(u64::MAX), 1, Some(version(1, 2, false)), NOW),
            Err(Refusal::SerialExhausted {
                name: "net".into(),
                serial: u64::MAX
            })
        );
    }

    #[test]
    fn a_rollback_is_refused_while_locked_for_unknown_or_encrypted_versions() {
        assert!(matches!(
            check_rollback(&locked(written(9)), 1, Some(version(1, 2, false)), NOW),
            Err(Refusal::Locked { .. })
        ));
        assert!(matches!(
            check_rollback(&written(9), 7, None, NOW),
            Err(Refusal::NotFound { .. })
        ));
        assert_eq!(
            check_rollback(&written(9), 1, Some(version(1, 2, true)), NOW),
            Err(Refusal::RollbackEncrypted { version: 1 })
        );
        let fresh = StateRecord::fresh("acme", "net", "inc", NOW);
        assert!(matches!(
            check_rollback(&fresh, 1, None, NOW),
            Err(Refusal::NotFound { .. })
        ));
    }

    #[test]
    fn a_delete_tombstones_and_keeps_the_counter() {
        let r = written(9);
        assert_eq!(check_delete(&r, NOW), Ok(()));
        let t = tombstone(&r, NOW);
        assert!(!t.is_visible() && t.deleted_at.is_some());
        assert_eq!(t.next_version, 4);
        assert!(matches!(
            check_delete(&t, NOW),
            Err(Refusal::NotFound { .. })
        ));
        assert!(matches!(
            check_delete(&locked(written(1)), NOW),
            Err(Refusal::Locked { .. })
        ));
    }

    #[test]
    fn allowed_actions_follow_permissions_and_the_lock() {
        let a = Allocation::default();
        let free = written(1);
        let op = allowed_actions(&free, &who(Role::Operator), &a, NOW);
        assert_eq!(
            op,
            AllowedActions {
                download: true,
                outputs: true,
                import: false,
                rollback: true,
                force_unlock: false,
                delete: false
            }
        );
        let admin_locked = allowed_actions(&locked(written(1)), &who(Role::Admin), &a, NOW);
        assert_eq!(
            admin_locked,
            AllowedActions {
                download: true,
                outputs: true,
                import: false,
                rollback: false,
                force_unlock: true,
                delete: false
            }
        );
        let viewer = allowed_actions(&free, &who(Role::Viewer), &a, NOW);
        assert!(!viewer.download && !viewer.rollback && !viewer.delete);
        assert!(viewer.outputs, "viewers read outputs by default");
        let no_outputs = a.with(Permission::Outputs, Some(Role::Admin));
        assert!(!allowed_actions(&free, &who(Role::Operator), &no_outputs, NOW).outputs);
    }

    #[test]
    fn org_actions_follow_the_allocation_and_the_admin_role() {
        let viewer = org_actions(&who(Role::Viewer), &Allocation::default());
        assert!(!viewer.download && !viewer.rollback && !viewer.audit);
        assert!(viewer.outputs);
        let operator = org_actions(&who(Role::Operator), &Allocation::default());
        assert!(operator.download && operator.import && operator.rollback);
        assert!(!operator.force_unlock && !operator.delete && !operator.permissions);
        let admin = org_actions(&who(Role::Admin), &Allocation::default());
        assert!(admin.force_unlock && admin.delete && admin.audit && admin.permissions);
        let read_for_viewers = Allocation {
            read: Some(Role::Viewer),
            manage: None,
            ..Allocation::default()
        };
        let viewer = org_actions(&who(Role::Viewer), &read_for_viewers);
        assert!(viewer.download && !viewer.import);
        let admin = org_actions(&who(Role::Admin), &read_for_viewers);
        assert!(
            !admin.delete && admin.audit,
            "a disabled permission refuses admins too"
        );
    }
}
