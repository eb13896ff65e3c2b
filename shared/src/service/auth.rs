//! Authentication: a token in, a caller out. Tokens are looked up by their SHA-256 on every
//! request (never cached, so a revocation or expiry takes effect at once) and compared in
//! constant time.

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::Error;
use crate::domain::permission::Role;
use crate::domain::{Actor, Principal, Timestamp};
use crate::ids::hex;
use crate::ports::{AccessCatalog, TokenKind};

/// Who is calling.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Caller {
    /// A person or script acting in one org.
    Org(Principal),
    /// The platform that runs flows: the runs API only.
    Platform { token_id: String },
}

/// Hex SHA-256 of a token: what the catalog stores and looks up.
pub fn token_hash(token: &str) -> String {
    hex(&Sha256::digest(token.as_bytes()))
}

/// Resolves a token to its caller.
///
/// # Errors
/// `Unauthenticated` for an unknown, revoked or expired token; `Unavailable` when the
/// catalog cannot be read.
pub async fn authenticate(
    catalog: &dyn AccessCatalog,
    token: &str,
    now: Timestamp,
) -> Result<Caller, Error> {
    let hash = token_hash(token);
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
        TokenKind::Personal => Caller::Org(Principal {
            org: record.org,
            role: record.role,
            actor: Actor::User { user: record.user },
            step: None,
        }),
        TokenKind::Step => {
            let grant = record
                .step
                .ok_or_else(|| Error::Damaged(format!("step token {} has no grant", record.id)))?;
            Caller::Org(Principal {
                org: record.org,
                // A step token acts as operator, within its grant.
                role: Role::Operator,
                actor: Actor::Step {
                    run: grant.run.clone(),
                    step: grant.step.clone(),
                    attempt: grant.attempt,
                },
                step: Some(grant),
            })
        }
    })
}
