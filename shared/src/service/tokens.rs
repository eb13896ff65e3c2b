//! Personal access tokens: created for one org, user and role, shown once, stored as their
//! SHA-256 only. Creating a token creates its org (with the default allocation) if new.

use aes_gcm::aead::rand_core::RngCore;
use aes_gcm::aead::OsRng;
use base64::Engine;

use super::auth::token_hash;
use super::Error;
use crate::domain::name::check_name;
use crate::domain::permission::{Allocation, Role};
use crate::domain::{Refusal, Timestamp};
use crate::ports::{AccessCatalog, OrgRecord, TokenRecord};

/// The org a new local store starts with.
pub const DEFAULT_ORG: &str = "default";
/// The user of the first admin token of a new local store.
pub const FIRST_ADMIN: &str = "admin";

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

/// Creates a token for `user` with `role` in `org` (creating the org if new) and returns
/// the token itself, which is never stored and cannot be shown again.
///
/// # Errors
/// `Refused` for an invalid org or user name; `Unavailable` when the catalog fails.
pub async fn create(
    catalog: &dyn AccessCatalog,
    org: &str,
    user: &str,
    role: Role,
    now: Timestamp,
) -> Result<String, Error> {
    check_name("org", org)?;
    check_user(user)?;
    catalog
        .create_org(&OrgRecord {
            org: org.to_owned(),
            allocation: Allocation::default(),
            created_at: now,
        })
        .await?;
    let mut secret = [0u8; 32];
    OsRng.fill_bytes(&mut secret);
    let token = format!(
        "{TOKEN_PREFIX}{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(secret)
    );
    catalog
        .put_token(&TokenRecord {
            hash: token_hash(&token),
            org: org.to_owned(),
            user: user.to_owned(),
            role,
            created_at: now,
            expires_at: None,
            revoked: false,
        })
        .await?;
    Ok(token)
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
    create(catalog, DEFAULT_ORG, FIRST_ADMIN, Role::Admin, now)
        .await
        .map(Some)
}
