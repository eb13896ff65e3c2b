//! Tokens: personal access tokens for one org, user and role, platform tokens for the runs
//! API, step tokens, and workload sessions opened by a CI job's ID token. Shown once, stored as their SHA-256 only; creating and revoking are audited.
//! Creating a personal token creates its org (with the default allocation) if new.

use aes_gcm::aead::rand_core::RngCore;
use aes_gcm::aead::OsRng;
use base64::Engine;

use super::auth::token_hash;
use super::Error;
use crate::domain::actor::{SessionGrant, StepGrant};
use crate::domain::audit::AuditAction;
use crate::domain::name::check_name;
use crate::domain::permission::{Allocation, Role};
use crate::domain::{Actor, Refusal, Timestamp};
use crate::ids::hex;
use crate::ports::{
    AccessCatalog, AuditEntry, ExchangeMark, OrgRecord, StoreError, TokenKind, TokenRecord,
};

/// The org a new local store starts with.
pub const DEFAULT_ORG: &str = "default";
/// The user of the first admin token of a new local store.
pub const FIRST_ADMIN: &str = "admin";
/// The org column of a platform token, which belongs to no org.
const PLATFORM_ORG: &str = "";

/// Every token starts with this, so a leaked one is recognisable (and scannable).
const TOKEN_PREFIX: &str = "hgs_";

/// Checks a user name: 1-128 printable characters without spaces.
fn check_user(user: &str) -> Result<(), Refusal> {
    let ok = !user.is_empty()
        && user.chars().count() <= 128
        && user.chars().all(|c| !c.is_whitespace() && !c.is_control());
    if ok {
        Ok(())
    } else {
        Err(Refusal::InvalidName {
            kind: "user",
            reason: "a user name is 1-128 printable characters without spaces".into(),
        })
    }
}

/// What a token is made for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NewToken<'a> {
    Personal {
        org: &'a str,
        user: &'a str,
        role: Role,
    },
    Platform,
    /// A step token; its grant's `token_id` is filled in here.
    Step {
        org: &'a str,
        grant: StepGrant,
    },
    /// A workload's session; its grant's `token_id` is filled in here. Stored with the
    /// mark of the ID token it was exchanged for, which opens no second session.
    Session {
        org: &'a str,
        role: Role,
        grant: Box<SessionGrant>,
        mark: ExchangeMark,
    },
}

fn audit(
    org: &str,
    action: AuditAction,
    actor: &Actor,
    token: &TokenRecord,
    now: Timestamp,
) -> AuditEntry {
    AuditEntry {
        org: org.to_owned(),
        at: now,
        action: action.as_str().into(),
        actor: actor.clone(),
        // A step token is for one state: its mint (and revocation) is that state's too.
        state: token.step.as_ref().map(|g| g.state.clone()),
        version: None,
        detail: serde_json::json!({
            "token_id": token.id,
            "kind": token.kind,
            "user": token.user,
            "role": token.role,
            "step": token.step,
            "session": token.session,
        }),
    }
}

/// Creates a token and returns it with its record. The token itself is never stored and
/// cannot be shown again.
///
/// # Errors
/// `Refused` for an invalid org or user name; `Unavailable` when the catalog fails.
pub async fn create(
    catalog: &dyn AccessCatalog,
    new: NewToken<'_>,
    by: &Actor,
    now: Timestamp,
) -> Result<(String, TokenRecord), Error> {
    let mut secret = [0u8; 32];
    OsRng.fill_bytes(&mut secret);
    let token = format!(
        "{TOKEN_PREFIX}{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(secret)
    );
    let mut id = [0u8; 6];
    OsRng.fill_bytes(&mut id);
    let id = format!("tok-{}", hex(&id));
    let mut session = None;
    let mut mark = None;
    let (org, user, role, kind, step, action) = match new {
        NewToken::Personal { org, user, role } => {
            check_name("org", org)?;
            check_user(user)?;
            catalog
                .create_org(&OrgRecord {
                    inventory_key: None,
                    org: org.to_owned(),
                    allocation: Allocation::default(),
                    created_at: now,
                    protections: Vec::new(),
                })
                .await?;
            (
                org,
                user.to_owned(),
                role,
                TokenKind::Personal,
                None,
                AuditAction::TokenCreated,
            )
        }
        NewToken::Platform => (
            PLATFORM_ORG,
            "platform".to_owned(),
            Role::Viewer,
            TokenKind::Platform,
            None,
            AuditAction::TokenCreated,
        ),
        NewToken::Step { org, mut grant } => {
            grant.token_id = id.clone();
            let user = format!(
                "run {} step {} attempt {}",
                grant.run, grant.step, grant.attempt
            );
            (
                org,
                user,
                Role::Operator,
                TokenKind::Step,
                Some(grant),
                AuditAction::StepTokenMinted,
            )
        }
        NewToken::Session {
            org,
            role,
            mut grant,
            mark: exchanged,
        } => {
            grant.token_id = id.clone();
            mark = Some(exchanged);
            let user = format!("workload {}", grant.job.subject);
            session = Some(grant);
            (
                org,
                user,
                role,
                TokenKind::Session,
                None,
                AuditAction::WorkloadSessionOpened,
            )
        }
    };
    let record = TokenRecord {
        hash: token_hash(&token),
        id,
        kind,
        org: org.to_owned(),
        user,
        role,
        created_at: now,
        expires_at: step
            .as_ref()
            .map(|g| g.expires_at)
            .or(session.as_ref().map(|g| g.expires_at)),
        revoked: false,
        step,
        session,
    };
    let entry = audit(org, action, by, &record, now);
    match &mark {
        None => catalog.put_token(&record, &entry).await?,
        Some(mark) => match catalog.put_session(&record, mark, &entry, now).await {
            Ok(()) => {}
            Err(StoreError::Conflict) => {
                return Err(Error::InvalidToken(
                    "this ID token was already exchanged: each ID token opens one session (a job that logs in again reuses the session it got; request a new ID token for another)".into(),
                ))
            }
            Err(e) => return Err(e.into()),
        },
    }
    Ok((token, record))
}

/// Every token's record, oldest first (no token itself is stored).
///
/// # Errors
/// `Unavailable` when the catalog fails.
pub async fn list(catalog: &dyn AccessCatalog) -> Result<Vec<TokenRecord>, Error> {
    Ok(catalog.tokens().await?)
}

/// Revokes the token with `id`; revoking a revoked token changes nothing.
///
/// # Errors
/// `Refused(NotFound)` for an unknown id; `Unavailable` when the catalog fails.
pub async fn revoke(
    catalog: &dyn AccessCatalog,
    id: &str,
    by: &Actor,
    now: Timestamp,
) -> Result<TokenRecord, Error> {
    let record = catalog
        .tokens()
        .await?
        .into_iter()
        .find(|t| t.id == id)
        .ok_or_else(|| Refusal::NotFound {
            what: format!("token {id}"),
        })?;
    revoke_record(catalog, record, by, now).await
}

/// Revokes the token `record` names, already in hand (a gone report reaches its attempt's
/// tokens through the run's own items, strongly consistently, never through a listing of
/// every token); revoking a revoked token changes nothing.
///
/// # Errors
/// `Unavailable` when the catalog fails.
pub async fn revoke_record(
    catalog: &dyn AccessCatalog,
    mut record: TokenRecord,
    by: &Actor,
    now: Timestamp,
) -> Result<TokenRecord, Error> {
    if !record.revoked {
        record.revoked = true;
        let entry = audit(&record.org, AuditAction::TokenRevoked, by, &record, now);
        catalog.put_token(&record, &entry).await?;
    }
    Ok(record)
}

/// On a store's first start: creates org `default` and an admin token, and returns the token
/// to print once. `None` when the org already exists.
///
/// # Errors
/// `Unavailable` when the catalog fails.
pub async fn bootstrap(
    catalog: &dyn AccessCatalog,
    now: Timestamp,
) -> Result<Option<String>, Error> {
    if catalog.org(DEFAULT_ORG).await?.is_some() {
        return Ok(None);
    }
    let new = NewToken::Personal {
        org: DEFAULT_ORG,
        user: FIRST_ADMIN,
        role: Role::Admin,
    };
    let (token, _) = create(catalog, new, &Actor::Cli, now).await?;
    Ok(Some(token))
}
