//! What the admin role gates: the audit log and the org's allocation of permissions. The
//! role itself (not an allocation) gates them, so nobody can lock themselves out.

use serde::Serialize;

use super::retry::{until_done, Attempt};
use super::{App, Error};
use crate::domain::audit::AuditAction;
use crate::domain::name::StateName;
use crate::domain::permission::{Allocation, Role};
use crate::domain::{Principal, Refusal};
use crate::ports::{AuditEntry, AuditQuery, StoreError};

/// The most audit entries one page holds.
pub const MAX_AUDIT_PAGE: usize = 500;

pub(super) fn require_admin(principal: &Principal, what: &str) -> Result<(), Error> {
    if principal.role == Role::Admin {
        return Ok(());
    }
    Err(Refusal::Forbidden {
        reason: format!(
            "{what} needs the admin role; this token has {}",
            principal.role.as_str()
        ),
    }
    .into())
}

/// One page of the audit log, newest first.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct AuditPage {
    pub entries: Vec<AuditEntry>,
    pub next_cursor: Option<String>,
}

/// Reads the caller's org's audit log.
///
/// # Errors
/// `Refused(Forbidden)` without the admin role.
pub async fn audit(
    app: &App,
    principal: &Principal,
    mut query: AuditQuery,
) -> Result<AuditPage, Error> {
    require_admin(principal, "the audit log")?;
    query.limit = query.limit.clamp(1, MAX_AUDIT_PAGE);
    let records = app.catalog.audit(&principal.org, &query).await?;
    let next_cursor = (records.len() == query.limit)
        .then(|| records.last().map(|r| r.seq.to_string()))
        .flatten();
    Ok(AuditPage {
        entries: records.into_iter().map(|r| r.entry).collect(),
        next_cursor,
    })
}

/// One state's page of the audit log. The state must exist, as for every route under its
/// name: once deleted, its entries (its deletion among them) stay in the org's log, where
/// [`audit`] reads them by name.
///
/// # Errors
/// `Refused(Forbidden)` without the admin role; `Refused(NotFound)` for a state the org
/// does not have.
pub async fn state_audit(
    app: &App,
    principal: &Principal,
    name: &StateName,
    query: AuditQuery,
) -> Result<AuditPage, Error> {
    require_admin(principal, "the audit log")?;
    super::manage::existing(app, &principal.org, name).await?;
    audit(app, principal, query).await
}

/// The org's allocation.
///
/// # Errors
/// `Refused(Forbidden)` without the admin role.
pub async fn permissions(app: &App, principal: &Principal) -> Result<Allocation, Error> {
    require_admin(principal, "the permissions")?;
    app.allocation(&principal.org).await
}

/// Replaces the allocation with `update` applied to it, audited with the old and new values.
///
/// # Errors
/// `Refused(Forbidden)` without the admin role.
pub async fn set_permissions(
    app: &App,
    principal: &Principal,
    update: impl Fn(Allocation) -> Allocation,
) -> Result<Allocation, Error> {
    require_admin(principal, "changing the permissions")?;
    until_done(|| async {
        let old = app.allocation(&principal.org).await?;
        let new = update(old);
        if new == old {
            return Ok(Attempt::Done(new));
        }
        let entry = AuditEntry {
            org: principal.org.clone(),
            at: app.clock.now(),
            action: AuditAction::PermissionsChanged.as_str().into(),
            actor: principal.actor.clone(),
            state: None,
            version: None,
            detail: serde_json::json!({"old": old, "new": new}),
        };
        match app
            .catalog
            .set_allocation(&principal.org, &old, &new, &entry)
            .await
        {
            Ok(()) => Ok(Attempt::Done(new)),
            Err(StoreError::Conflict) => Ok(Attempt::LostRace),
            Err(e) => Err(e.into()),
        }
    })
    .await
}
