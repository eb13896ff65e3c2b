//! Protected states, the admin role's: list, read, set and remove an org's rules that keep
//! changes of the states a pattern matches to workload sessions of named trust policies
//! (`domain::protection`), each change audited. A rule names policies the org has when it is
//! set; the backend's requests check the rules (`App::require_to_change`).

use serde::Serialize;

use super::admin::require_admin;
use super::retry::{until_done, Attempt};
use super::{App, Error};
use crate::domain::audit::AuditAction;
use crate::domain::protection::{Protection, MAX_PROTECTIONS};
use crate::domain::trust::check_pattern;
use crate::domain::{Principal, Refusal};
use crate::ports::{AuditEntry, StoreError};

/// An org's protected-state rules, by pattern.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Protections {
    pub org: String,
    pub protections: Vec<Protection>,
}

async fn stored(app: &App, org: &str) -> Result<Vec<Protection>, Error> {
    Ok(app
        .catalog
        .org(org)
        .await?
        .map(|o| o.protections)
        .unwrap_or_default())
}

fn not_found(pattern: &str) -> Error {
    Refusal::NotFound {
        what: format!("protected-state rule {pattern:?}"),
    }
    .into()
}

fn entry(
    principal: &Principal,
    action: AuditAction,
    detail: serde_json::Value,
    app: &App,
) -> AuditEntry {
    AuditEntry {
        org: principal.org.clone(),
        at: app.clock.now(),
        action: action.as_str().into(),
        actor: principal.actor.clone(),
        state: None,
        version: None,
        detail,
    }
}

/// The caller's org's rules.
///
/// # Errors
/// `Refused(Forbidden)` without the admin role.
pub async fn list(app: &App, principal: &Principal) -> Result<Protections, Error> {
    require_admin(principal, "protected states")?;
    Ok(Protections {
        org: principal.org.clone(),
        protections: stored(app, &principal.org).await?,
    })
}

/// The rule of `pattern`.
///
/// # Errors
/// `Refused(Forbidden)` without the admin role; `Refused(NotFound)` for a pattern the org
/// has no rule of.
pub async fn show(app: &App, principal: &Principal, pattern: &str) -> Result<Protection, Error> {
    require_admin(principal, "protected states")?;
    check_pattern(pattern)?;
    stored(app, &principal.org)
        .await?
        .into_iter()
        .find(|p| p.pattern == pattern)
        .ok_or_else(|| not_found(pattern))
}

/// Sets the rule of `pattern` to `policies`, audited. Returns it and whether it is new.
///
/// # Errors
/// `Refused(Forbidden)` without the admin role; `Refused(InvalidRequest)` for a rule outside
/// the rules of `domain::protection` or one rule too many; `Refused(NotFound)` naming a
/// policy the org does not have.
pub async fn put(
    app: &App,
    principal: &Principal,
    pattern: &str,
    policies: Vec<String>,
) -> Result<(Protection, bool), Error> {
    require_admin(principal, "changing protected states")?;
    let rule = Protection {
        pattern: pattern.to_owned(),
        policies,
    }
    .normalized();
    rule.check()?;
    let known = app.catalog.trust_policies(&principal.org).await?;
    let unknown: Vec<&str> = rule
        .policies
        .iter()
        .filter(|name| !known.iter().any(|p| &p.name == *name))
        .map(String::as_str)
        .collect();
    if !unknown.is_empty() {
        let mut names: Vec<&str> = known.iter().map(|p| p.name.as_str()).collect();
        names.sort_unstable();
        // A name the org has no policy of, as for any other name that is not there.
        return Err(Refusal::NotFound {
            what: format!(
                "trust policy {} (a protected state names the org's policies whose CI sessions may change it; the org has {})",
                unknown.join(", "),
                if names.is_empty() {
                    "none: add one with PUT /api/org/trust-policies/{name}".to_owned()
                } else {
                    names.join(", ")
                }
            ),
        }
        .into());
    }
    until_done(|| async {
        let rules = stored(app, &principal.org).await?;
        let old = rules.iter().find(|p| p.pattern == rule.pattern);
        if old == Some(&rule) {
            return Ok(Attempt::Done((rule.clone(), false)));
        }
        // Checked on the rules read: DynamoDB swaps the whole settings item, so two new rules
        // at once cannot pass it there; SQLite swaps one rule's row, so there they could
        // end one or two past it, which costs nothing but a longer list.
        if old.is_none() && rules.len() >= MAX_PROTECTIONS {
            return Err(Refusal::InvalidRequest {
                reason: format!(
                    "an org holds at most {MAX_PROTECTIONS} protected-state rules: cover several states with one pattern ('*' for any run of characters)"
                ),
            }
            .into());
        }
        let detail = serde_json::json!({
            "pattern": rule.pattern,
            "policies": rule.policies,
            "old_policies": old.map(|o| &o.policies),
        });
        let audit = entry(principal, AuditAction::ProtectionSet, detail, app);
        match app
            .catalog
            .put_protection(&principal.org, old, &rule, &audit)
            .await
        {
            Ok(()) => Ok(Attempt::Done((rule.clone(), old.is_none()))),
            Err(StoreError::Conflict) => Ok(Attempt::LostRace),
            Err(e) => Err(e.into()),
        }
    })
    .await
}

/// Removes the rule of `pattern`, audited: its states are changed as their roles allow again.
///
/// # Errors
/// `Refused(Forbidden)` without the admin role; `Refused(NotFound)` for a pattern the org
/// has no rule of.
pub async fn delete(app: &App, principal: &Principal, pattern: &str) -> Result<Protection, Error> {
    require_admin(principal, "changing protected states")?;
    check_pattern(pattern)?;
    until_done(|| async {
        let Some(old) = stored(app, &principal.org)
            .await?
            .into_iter()
            .find(|p| p.pattern == pattern)
        else {
            return Err(not_found(pattern));
        };
        let detail = serde_json::json!({"pattern": old.pattern, "policies": old.policies});
        let audit = entry(principal, AuditAction::ProtectionRemoved, detail, app);
        match app
            .catalog
            .delete_protection(&principal.org, &old, &audit)
            .await
        {
            Ok(()) => Ok(Attempt::Done(old)),
            Err(StoreError::Conflict) => Ok(Attempt::LostRace),
            Err(e) => Err(e.into()),
        }
    })
    .await
}
