//! Trust policies, the admin role's: list, read, create, replace, remove, each change
//! audited with the policy (and the one it replaced). The org is the admin's own; an issuer
//! and audience pair another org uses is refused at creation and on change.

use serde::Serialize;

use super::admin::require_admin;
use super::retry::{until_done, Attempt};
use super::{App, Error};
use crate::domain::audit::AuditAction;
use crate::domain::name::check_name;
use crate::domain::trust::TrustPolicy;
use crate::domain::{Principal, Refusal, Timestamp};
use crate::ports::{AuditEntry, StoreError, TrustWrite};

/// An org's trust policies, by name.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct TrustPolicies {
    pub org: String,
    pub policies: Vec<TrustPolicy>,
}

fn entry(
    principal: &Principal,
    action: AuditAction,
    detail: serde_json::Value,
    now: Timestamp,
) -> AuditEntry {
    AuditEntry {
        org: principal.org.clone(),
        at: now,
        action: action.as_str().into(),
        actor: principal.actor.clone(),
        state: None,
        version: None,
        detail,
    }
}

/// The caller's org's policies.
///
/// # Errors
/// `Refused(Forbidden)` without the admin role.
pub async fn list(app: &App, principal: &Principal) -> Result<TrustPolicies, Error> {
    require_admin(principal, "trust policies")?;
    let mut policies = app.catalog.trust_policies(&principal.org).await?;
    policies.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(TrustPolicies {
        org: principal.org.clone(),
        policies,
    })
}

async fn stored(app: &App, org: &str, name: &str) -> Result<Option<TrustPolicy>, Error> {
    Ok(app
        .catalog
        .trust_policies(org)
        .await?
        .into_iter()
        .find(|p| p.name == name))
}

/// One policy of the caller's org.
///
/// # Errors
/// `Refused(Forbidden)` without the admin role; `Refused(NotFound)` for a name the org has
/// no policy of.
pub async fn show(app: &App, principal: &Principal, name: &str) -> Result<TrustPolicy, Error> {
    require_admin(principal, "trust policies")?;
    check_name("policy", name)?;
    stored(app, &principal.org, name)
        .await?
        .ok_or_else(|| not_found(name))
}

fn not_found(name: &str) -> Error {
    Refusal::NotFound {
        what: format!("trust policy {name}"),
    }
    .into()
}

/// Whether [`put`] creates a policy or replaces one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PutMode {
    /// `POST`: a new name only.
    Create,
    /// `PUT .../{name}`: creates or replaces the policy of that name.
    Upsert,
}

/// Creates or replaces a policy, audited. Returns it and whether it was created.
///
/// # Errors
/// `Refused(Forbidden)` without the admin role; `Refused(InvalidRequest)` for a policy
/// outside the rules; `Refused(PolicyExists)` to create a name in use;
/// `Refused(TrustPairTaken)` when another org's policies use its issuer and audience.
pub async fn put(
    app: &App,
    principal: &Principal,
    policy: TrustPolicy,
    mode: PutMode,
) -> Result<(TrustPolicy, bool), Error> {
    require_admin(principal, "changing trust policies")?;
    policy.check()?;
    until_done(|| async {
        let old = stored(app, &principal.org, &policy.name).await?;
        if old.is_some() && mode == PutMode::Create {
            return Err(Refusal::PolicyExists {
                name: policy.name.clone(),
            }
            .into());
        }
        if old.as_ref() == Some(&policy) {
            return Ok(Attempt::Done((policy.clone(), false)));
        }
        let (action, detail) = match &old {
            None => (
                AuditAction::TrustPolicyCreated,
                serde_json::json!({"policy": policy}),
            ),
            Some(old) => (
                AuditAction::TrustPolicyChanged,
                serde_json::json!({"old": old, "new": policy}),
            ),
        };
        let audit = entry(principal, action, detail, app.clock.now());
        match app
            .catalog
            .put_trust_policy(&principal.org, old.as_ref(), &policy, &audit)
            .await
        {
            Ok(TrustWrite::Written) => Ok(Attempt::Done((policy.clone(), old.is_none()))),
            Ok(TrustWrite::PairTaken { .. }) => Err(Refusal::TrustPairTaken {
                issuer: policy.issuer.clone(),
                audience: policy.audience.clone(),
            }
            .into()),
            Err(StoreError::Conflict) => Ok(Attempt::LostRace),
            Err(e) => Err(e.into()),
        }
    })
    .await
}

/// Removes a policy, audited. Sessions it opened run on to their end: they were granted
/// for that long, as a step token outlives a change of the allocation.
///
/// # Errors
/// `Refused(Forbidden)` without the admin role; `Refused(NotFound)` for a name the org has
/// no policy of.
pub async fn delete(app: &App, principal: &Principal, name: &str) -> Result<TrustPolicy, Error> {
    require_admin(principal, "changing trust policies")?;
    check_name("policy", name)?;
    until_done(|| async {
        let Some(old) = stored(app, &principal.org, name).await? else {
            return Err(not_found(name));
        };
        let audit = entry(
            principal,
            AuditAction::TrustPolicyDeleted,
            serde_json::json!({"policy": old}),
            app.clock.now(),
        );
        match app
            .catalog
            .delete_trust_policy(&principal.org, &old, &audit)
            .await
        {
            Ok(()) => Ok(Attempt::Done(old)),
            Err(StoreError::Conflict) => Ok(Attempt::LostRace),
            Err(e) => Err(e.into()),
        }
    })
    .await
}
