//! Authentication: a token in, a caller out. Tokens are looked up by their SHA-256 on every
//! request (never cached, so a revocation or expiry takes effect at once) and compared in
//! constant time.

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::{App, Error};
use crate::domain::actor::SessionGrant;
use crate::domain::permission::Role;
use crate::domain::{Actor, Principal};
use crate::ids::hex;
use crate::ports::TokenKind;

/// Who is calling.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Caller {
    /// A person or script acting in one org (boxed: a step's grant makes it far larger than
    /// the platform's variant).
    Org(Box<Principal>),
    /// The platform that runs flows: the runs API only.
    Platform { token_id: String },
}

/// Hex SHA-256 of a token: what the catalog stores and looks up.
pub fn token_hash(token: &str) -> String {
    hex(&Sha256::digest(token.as_bytes()))
}

/// Resolves a token to its caller.
///
/// A step token works until its expiry, its attempt's gone report (which revokes it), or its
/// run's end plus the grace, whichever comes first: the lock it holds stops being live then
/// too, so the token cannot take the state again. Between the run's end and the grace it
/// still works, but sets no hold: a hold is for a run that goes on to its apply.
///
/// # Errors
/// `Unauthenticated` for an unknown, revoked or expired token, or a step token of a run
/// that ended more than the grace ago; `Unavailable` when the catalog cannot be read.
pub async fn authenticate(app: &App, token: &str) -> Result<Caller, Error> {
    by_hash(app, token_hash(token)).await
}

/// Resolves a step's (or a workload session's) principal again from its token as it stands
/// now: what a lock decides on after its commit found the token revoked or the run ended
/// since the request was authenticated. Any other principal is returned as it is.
///
/// # Errors
/// As [`authenticate`].
pub(super) async fn again(app: &App, principal: &Principal) -> Result<Principal, Error> {
    let (hash, id) = match (&principal.step, &principal.session) {
        (Some(grant), _) => (&grant.token_hash, &grant.token_id),
        (None, Some(grant)) => (&grant.token_hash, &grant.token_id),
        (None, None) => return Ok(principal.clone()),
    };
    match by_hash(app, hash.clone()).await? {
        Caller::Org(principal) => Ok(*principal),
        Caller::Platform { token_id } => Err(Error::Damaged(format!(
            "token {id} now reads as the platform's {token_id}"
        ))),
    }
}

async fn by_hash(app: &App, hash: String) -> Result<Caller, Error> {
    let (catalog, now) = (app.catalog.as_ref(), app.clock.now());
    let record = catalog
        .token(&hash)
        .await?
        .filter(|r| bool::from(r.hash.as_bytes().ct_eq(hash.as_bytes())))
        .ok_or_else(|| Error::Unauthenticated("unknown token".into()))?;
    if record.revoked {
        return Err(Error::Unauthenticated("this token was revoked".into()));
    }
    if record.expires_at.is_some_and(|at| at <= now) {
        return Err(Error::Unauthenticated("this token has expired".into()));
    }
    Ok(match record.kind {
        TokenKind::Platform => Caller::Platform {
            token_id: record.id,
        },
        TokenKind::Personal => Caller::Org(Box::new(Principal {
            session: None,
            org: record.org,
            role: record.role,
            actor: Actor::User { user: record.user },
            step: None,
        })),
        TokenKind::Step => {
            let mut grant = record
                .step
                .ok_or_else(|| Error::Damaged(format!("step token {} has no grant", record.id)))?;
            grant.token_hash = hash;
            let ended = catalog.run(&grant.run).await?.and_then(|r| r.ended_at);
            if let Some(ended) = ended {
                let last = ended + app.limits.run_end_grace;
                if last <= now {
                    return Err(Error::Unauthenticated(format!(
                        "run {} ended and its grace has passed: this step token no longer works",
                        grant.run
                    )));
                }
                grant.hold = false;
                // A lock taken within the grace lives as long as the token does: no longer
                // than the run's end plus the grace, as the run's end made the others.
                grant.expires_at = grant.expires_at.min(last);
            }
            Caller::Org(Box::new(Principal {
                session: None,
                org: record.org,
                // A step token acts as operator, within its grant.
                role: Role::Operator,
                actor: Actor::Step {
                    run: grant.run.clone(),
                    step: grant.step.clone(),
                    attempt: grant.attempt,
                },
                step: Some(grant),
            }))
        }
        TokenKind::Session => {
            let mut grant = record.session.ok_or_else(|| {
                Error::Damaged(format!("session token {} has no grant", record.id))
            })?;
            grant.token_hash = hash;
            let opened = record.created_at;
            let role =
                with_its_policy(app, &record.org, record.role, opened, &mut grant, now).await?;
            Caller::Org(Box::new(Principal {
                org: record.org,
                role,
                actor: Actor::Workload(Box::new(grant.job.clone())),
                step: None,
                session: Some(grant),
            }))
        }
    })
}

/// A workload session as its trust policy stands now (read at most once a minute per
/// process): removed, or changed in whom it lets in (its issuer, audience or claims: its
/// revision), the session has ended with it; changed in its states or role, the session
/// reaches what both the policy it opened under and the policy now allow (never more);
/// shortened in its session length, the session ends that long after it opened.
/// Returns the role the session acts with.
///
/// # Errors
/// `Unauthenticated` for a session whose policy is gone or lets other jobs in now.
async fn with_its_policy(
    app: &App,
    org: &str,
    role: Role,
    opened: crate::domain::Timestamp,
    grant: &mut SessionGrant,
    now: crate::domain::Timestamp,
) -> Result<Role, Error> {
    let current = app
        .issuers
        .session_policy(app.catalog.as_ref(), org, &grant.policy, now)
        .await?;
    let Some(policy) = current else {
        return Err(Error::Unauthenticated(format!(
            "trust policy {} was removed, and this session with it: ask an admin, then log in again",
            grant.policy
        )));
    };
    // A session opened before sessions recorded the revision is narrowed only.
    if !grant.policy_revision.is_empty() && policy.revision() != grant.policy_revision {
        return Err(Error::Unauthenticated(format!(
            "trust policy {} changed whom it lets in (its issuer, audience or claims) since this session opened, which ended it: log in again",
            grant.policy
        )));
    }
    // A policy that now opens shorter sessions shortens the open ones: from their start.
    let seconds = i64::try_from(policy.session_seconds).unwrap_or(i64::MAX);
    if opened + time::Duration::seconds(seconds) <= now {
        return Err(Error::Unauthenticated(format!(
            "trust policy {} now opens sessions of {} seconds, and this one is older: log in again",
            grant.policy, policy.session_seconds
        )));
    }
    grant.narrowed_to = Some(policy.states.clone());
    Ok(role.min(policy.role))
}
