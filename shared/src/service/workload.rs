//! Workload identity: a CI job's OpenID Connect ID token exchanged for a session token under
//! the trust policy it matches, and a session ended early by its job. The org comes from the
//! policy (an issuer and audience pair belongs to one org), never from the request. Nothing is
//! fetched for an issuer no policy names.

use serde::Serialize;

use super::runs::lower_liveness;
use super::tokens::{self, NewToken};
use super::{App, Error};
use crate::crypto::id_token::{self, TokenRefused};
use crate::domain::actor::{SessionGrant, WorkloadJob};
use crate::domain::audit::AuditAction;
use crate::domain::permission::Role;
use crate::domain::trust::MAX_SESSION_SECONDS;
use crate::domain::untrusted::shown;
use crate::domain::{rfc3339, Actor, Principal, Refusal};
use crate::ports::{AuditEntry, ExchangeMark, TrustRecord};

/// A session opened for a job: its token (shown once) and what it reaches.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Session {
    pub token: String,
    /// RFC 3339: the session and its token end then; its locks a grace later.
    pub expires_at: String,
    pub org: String,
    pub role: Role,
    /// The policy's state name patterns.
    pub states: Vec<String>,
}

fn unauthenticated(refused: TokenRefused) -> Error {
    Error::Unauthenticated(refused.0)
}

fn forbidden(reason: String) -> Error {
    Refusal::Forbidden { reason }.into()
}

/// Verifies `raw` (a CI job's ID token) and opens a session under the trust policy it
/// matches: the one named `wanted` when the job names one, else the only one.
///
/// The order matters: the cheap checks of the token's form come first (its size, an issuer
/// that is a short `https://` URL, an allowed algorithm, a key id), then the issuer's
/// policies (read once and remembered for `issuers::POLICIES_FOR`: tokens naming a shared
/// issuer cost no table read each; none, and nothing is fetched), the key, the signature,
/// and only then are claims believed.
///
/// # Errors
/// `Unauthenticated` (401) for a token that is not a signed, current ID token of an issuer
/// and audience some policy names; `InvalidToken` (401) for one exchanged already;
/// `Refused(Forbidden)` (403) for a genuine token no policy lets in (its claims, or a
/// lifetime over the policy's session); `Refused(AmbiguousPolicy)` (409) when several
/// policies let it in and the job named none; `Unavailable` when the issuer's keys cannot be
/// fetched.
pub async fn exchange(app: &App, raw: &str, wanted: Option<&str>) -> Result<Session, Error> {
    let token = id_token::unverified(raw).map_err(unauthenticated)?;
    let alg = id_token::allowed_algorithm(&token.alg).map_err(unauthenticated)?;
    let kid = token
        .key_id
        .as_deref()
        .ok_or_else(|| Error::Unauthenticated("the ID token names no signing key (kid)".into()))?;
    let issuer = shown(&token.issuer);
    let now = app.clock.now();
    let policies = app
        .issuers
        .policies_of(app.catalog.as_ref(), &token.issuer, now)
        .await?;
    if policies.is_empty() {
        return Err(Error::Unauthenticated(format!(
            "no trust policy names issuer {issuer}: an admin adds one (POST /api/org/trust-policies)"
        )));
    }
    let key = app.issuers.key(&token.issuer, kid, now).await?;
    let claims = id_token::verify_signature(raw, alg, &key).map_err(unauthenticated)?;
    let lifetime = id_token::check_claims(&claims, &token.issuer, now).map_err(unauthenticated)?;
    let audiences = id_token::audiences(&claims);
    let candidates: Vec<&TrustRecord> = policies
        .iter()
        .filter(|r| audiences.contains(&r.policy.audience))
        .collect();
    if candidates.is_empty() {
        let shown_audiences: Vec<String> = audiences.iter().map(|a| shown(a)).collect();
        return Err(Error::Unauthenticated(format!(
            "no trust policy of issuer {issuer} takes the ID token's audience {shown_audiences:?}: request the token for the audience your policy names"
        )));
    }
    if candidates.iter().any(|r| r.org != candidates[0].org) {
        return Err(Error::Unauthenticated(
            "the ID token carries the audiences of more than one org: request it for one audience"
                .into(),
        ));
    }
    let record = choose(&candidates, &claims, wanted)?;
    let policy = &record.policy;
    let session_seconds = policy.session_seconds.min(MAX_SESSION_SECONDS);
    if lifetime.seconds() > session_seconds as i64 {
        return Err(forbidden(format!(
            "the ID token is valid for {} seconds, longer than the {session_seconds}-second session policy {} allows: request a shorter-lived token",
            lifetime.seconds(),
            policy.name
        )));
    }
    let job = WorkloadJob::from_claims(&claims);
    let expires_at = now + time::Duration::seconds(session_seconds as i64);
    let grant = Box::new(SessionGrant {
        token_id: String::new(),
        policy: policy.name.clone(),
        policy_revision: policy.revision(),
        narrowed_to: None,
        states: policy.states.clone(),
        job: job.clone(),
        expires_at,
        locks_live_until: expires_at + app.limits.run_end_grace,
        token_hash: String::new(),
    });
    // The token is refused anyway once its exp and the leeway have passed: its mark need not
    // outlive that. `check_claims` bounds exp, so this is a time.
    let until =
        time::OffsetDateTime::from_unix_timestamp(lifetime.expires + id_token::LEEWAY_SECONDS)
            .map_err(|_| Error::Unauthenticated("the ID token's exp is not a time".into()))?;
    let mark = ExchangeMark {
        key: id_token::replay_key(raw, &token.issuer, &claims),
        until,
    };
    let new = NewToken::Session {
        org: &record.org,
        role: policy.role,
        grant,
        mark,
    };
    let by = Actor::Workload(Box::new(job));
    let (token, _) = tokens::create(app.catalog.as_ref(), new, &by, now).await?;
    tracing::info!(
        org = %record.org,
        policy = %policy.name,
        job = %shown(&by.describe()),
        expires_at = %rfc3339(expires_at),
        "workload session opened"
    );
    Ok(Session {
        token,
        expires_at: rfc3339(expires_at),
        org: record.org.clone(),
        role: policy.role,
        states: policy.states.clone(),
    })
}

/// The policy a verified token opens its session under: `wanted` when the job names one
/// (and it lets the job in), else the one policy that lets it in. Never the first of
/// several by name: a broad policy would then shadow a narrow one.
///
/// # Errors
/// `Refused(Forbidden)` when none lets it in (each policy's reason named), or `wanted` is
/// not among the candidates; `Refused(AmbiguousPolicy)` when several do and none is named.
fn choose<'a>(
    candidates: &[&'a TrustRecord],
    claims: &serde_json::Map<String, serde_json::Value>,
    wanted: Option<&str>,
) -> Result<&'a TrustRecord, Error> {
    let named: Vec<&'a TrustRecord> = match wanted {
        Some(name) => candidates
            .iter()
            .copied()
            .filter(|r| r.policy.name == name)
            .collect(),
        None => candidates.to_vec(),
    };
    if named.is_empty() {
        return Err(forbidden(format!(
            "no trust policy named {} takes this issuer and audience",
            shown(wanted.unwrap_or_default())
        )));
    }
    let mut reasons = Vec::new();
    let mut matching = Vec::new();
    for record in named {
        match record.policy.match_claims(claims) {
            Ok(()) => matching.push(record),
            Err(why) => reasons.push(format!("policy {}: {}", record.policy.name, shown(&why))),
        }
    }
    match matching[..] {
        [] => Err(forbidden(format!(
            "no trust policy lets this job in ({})",
            reasons.join("; ")
        ))),
        [one] => Ok(one),
        _ => {
            let mut policies: Vec<String> =
                matching.iter().map(|r| r.policy.name.clone()).collect();
            policies.sort();
            Err(Refusal::AmbiguousPolicy { policies }.into())
        }
    }
}

/// Ends the caller's workload session now: its token stops working, and every lock it holds
/// stops being live at once (the next lock takes it over, as a gone step's). Ending an ended
/// session cannot happen: its token no longer authenticates.
///
/// # Errors
/// `Refused(Forbidden)` for any caller but a workload session.
pub async fn end_session(app: &App, principal: &Principal) -> Result<(), Error> {
    let Some(grant) = &principal.session else {
        return Err(forbidden(
            "only a workload session ends itself here: revoke other tokens with `hegemony-state token revoke`".into(),
        ));
    };
    let now = app.clock.now();
    let mut record = app
        .catalog
        .token(&grant.token_hash)
        .await?
        .ok_or_else(|| Error::Unauthenticated("unknown token".into()))?;
    if !record.revoked {
        record.revoked = true;
        let entry = AuditEntry {
            org: principal.org.clone(),
            at: now,
            action: AuditAction::WorkloadSessionEnded.as_str().into(),
            actor: principal.actor.clone(),
            state: None,
            version: None,
            detail: serde_json::json!({"token_id": record.id, "policy": grant.policy}),
        };
        app.catalog.put_token(&record, &entry).await?;
    }
    // Read after the revocation: a lock committing with this session either is already
    // among the items, or finds its token revoked and fails (`StepCheck`).
    for item in app.catalog.run_items(&grant.run_key()).await? {
        lower_liveness(app, &item.org, &item.state, &item.token_id, now).await?;
    }
    Ok(())
}
