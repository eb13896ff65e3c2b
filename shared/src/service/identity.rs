//! Who a token is: its org, the actor it acts as, its role, and what that role may do in
//! the org now. Never the token or anything secret, so a page can show it to its holder.

use serde::Serialize;

use super::{App, Error};
use crate::domain::actor::Actor;
use crate::domain::manage::{org_actions, OrgActions};
use crate::domain::permission::Role;
use crate::domain::Principal;

/// A token's identity, as `GET /api/whoami` answers it.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Identity {
    pub org: String,
    pub actor: Actor,
    pub role: Role,
    pub allowed_actions: OrgActions,
}

/// The caller's identity under its org's allocation as it is now. Any role may ask.
///
/// # Errors
/// `Unavailable` when the org's allocation cannot be read.
pub async fn whoami(app: &App, principal: &Principal) -> Result<Identity, Error> {
    let allocation = app.allocation(&principal.org).await?;
    Ok(Identity {
        org: principal.org.clone(),
        actor: principal.actor.clone(),
        role: principal.role,
        allowed_actions: org_actions(principal, &allocation),
    })
}
