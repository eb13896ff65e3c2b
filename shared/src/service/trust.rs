//! Trust policies, the admin role's: list, read, create, replace, remove, each change
//! audited with the policy (and the one it replaced). The org is the admin's own; an issuer
//! and audience pair another org uses is refused at creation and on change.

use serde::Serialize;

use super::admin::require_admin;
use super::retry::{until_done, Attempt};
use super::{App, Error};
use crate::domain::audit::AuditAction;
use crate::domain::name::check_name;
use crate::domain::trust::{TrustPolicy, MAX_POLICIES_PER_ORG};
use crate::domain::{Principal, Refusal, Timestamp};
use crate::ports::{AuditEntry, StoreError, TokenKind, TrustWrite};

/// An org's trust policies, by name, with what an admin should know of them.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct TrustPolicies {
    pub org: String,
    pub policies: Vec<TrustPolicy>,
    /// A policy that matches names only or no claim at all, or that was made before a rule
    /// it breaks (an audience not ending with the org's name, no owner id on a shared
    /// issuer): it keeps working, and is said here.
    pub warnings: Vec<String>,
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
    let warnings = policies
        .iter()
        .flat_map(|p| {
            p.legacy_warning(&principal.org)
                .into_iter()
                .chain(p.warnings())
        })
        .collect();
    Ok(TrustPolicies {
        org: principal.org.clone(),
        policies,
        warnings,
    })
}

async fn stored(app: &App, org: &str, name: &str) -> Result<Option<TrustPolicy>, Error> {
    Ok(app.catalog.trust_policy(org, name).await?)
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
/// outside the rules (an audience not naming the org, a shared issuer without an owner id);
/// `Refused(PolicyLimit)` for a new policy past [`MAX_POLICIES_PER_ORG`];
/// `Refused(PolicyExists)` to create a name in use;
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
        if policy.needs_org_check(old.as_ref()) {
            policy.check_for_org(&principal.org)?;
        }
        if old.is_none() {
            let held = app.catalog.trust_policies(&principal.org).await?.len();
            if held >= MAX_POLICIES_PER_ORG {
                return Err(Refusal::PolicyLimit {
                    held,
                    max: MAX_POLICIES_PER_ORG,
                }
                .into());
            }
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
            Ok(TrustWrite::Written) => {
                forget(app, &principal.org, old.as_ref(), &policy);
                Ok(Attempt::Done((policy.clone(), old.is_none())))
            }
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

/// Removes a policy, audited. The sessions it opened end with it: their tokens are revoked
/// (each audited), and each checks its policy anyway (at most a minute after it was read,
/// `issuers::SESSION_POLICY_FOR`). Their locks stay live to the session's end plus the
/// grace, as a killed job's do, unless an admin force-unlocks them.
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
            Ok(()) => {
                forget(app, &principal.org, None, &old);
                end_sessions(app, principal, &old).await;
                Ok(Attempt::Done(old))
            }
            Err(StoreError::Conflict) => Ok(Attempt::LostRace),
            Err(e) => Err(e.into()),
        }
    })
    .await
}

/// Ends the open sessions `policy` opened, now that it is removed: each token revoked and
/// audited as its job's own end would be. Without it a policy removed and made again (the
/// same issuer, audience and claims, so the same revision) would let a leaked session in
/// again. A failure is logged, not answered: the policy is removed already, and until one of
/// its name exists again every request of its sessions is refused anyway.
async fn end_sessions(app: &App, principal: &Principal, policy: &TrustPolicy) {
    let now = app.clock.now();
    let tokens = match app.catalog.tokens().await {
        Ok(tokens) => tokens,
        Err(e) => {
            tracing::warn!(org = %principal.org, policy = %policy.name, reason = %e, "could not list the removed trust policy's sessions to end them");
            return;
        }
    };
    for mut token in tokens {
        let of_policy = token.kind == TokenKind::Session
            && token.org == principal.org
            && !token.revoked
            && token.expires_at.is_some_and(|at| at > now)
            && token
                .session
                .as_ref()
                .is_some_and(|g| g.policy == policy.name);
        if !of_policy {
            continue;
        }
        token.revoked = true;
        let audit = entry(
            principal,
            AuditAction::WorkloadSessionEnded,
            serde_json::json!({"token_id": token.id, "policy": policy.name, "why": "its trust policy was removed"}),
            now,
        );
        if let Err(e) = app.catalog.put_token(&token, &audit).await {
            tracing::warn!(org = %principal.org, policy = %policy.name, token_id = %token.id, reason = %e, "could not end a removed trust policy's session");
        }
    }
}

/// Forgets what this process read of the org's policies and of the issuers involved, so
/// the exchange and the sessions it serves see the change at once.
fn forget(app: &App, org: &str, old: Option<&TrustPolicy>, policy: &TrustPolicy) {
    app.issuers.forget(org, &policy.issuer);
    if let Some(old) = old {
        app.issuers.forget(org, &old.issuer);
    }
}
