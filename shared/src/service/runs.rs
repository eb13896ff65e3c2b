//! The platform's runs API: minting step tokens, a run's end, a step container's end. A
//! step's lock lives as long as its token; a run's end lowers it to the end plus the grace,
//! a gone report to now, on every state the run's (or attempt's) tokens lock, found through
//! the run's items. A lock past its time reads as unlocked and the next change takes it over.
//! A step's lock commits on its run and token as they stand (`ports::StepCheck`), so one
//! that raced the end or the gone report cannot slip past them with the token's full life.

use time::Duration;

use super::retry::{commit, until_done, Attempt};
use super::tokens::{self, NewToken};
use super::{App, Error};
use crate::domain::actor::{StepGrant, StepKind};
use crate::domain::name::check_name;
use crate::domain::permission::{Allocation, Permission, Role};
use crate::domain::{Actor, Refusal, Timestamp};
use crate::ports::{Commit, OrgRecord, RunItem, RunRecord, TokenRecord};

/// A step token never outlives this.
pub const MAX_TOKEN_LIFETIME: Duration = Duration::hours(24);
/// What a step token gets beyond its step's timeout.
pub const TOKEN_MARGIN: Duration = Duration::minutes(5);

/// A mint request: one attempt of one step of one run on one state.
#[derive(Debug, Clone)]
pub struct MintRequest {
    pub org: String,
    pub state: String,
    pub step: String,
    pub attempt: u32,
    pub kind: StepKind,
    pub timeout_seconds: u64,
    pub hold: bool,
}

/// Mints a step token.
///
/// # Errors
/// `Refused`: illegal names, `hold` with an apply, `RunOrgMismatch`, `RunEnded`,
/// `PermissionNotAllocated`; `NoKey` when managed state is unavailable, so the step fails
/// with that reason before it starts.
pub async fn mint(
    app: &App,
    run: &str,
    request: &MintRequest,
) -> Result<(String, TokenRecord), Error> {
    check_name("run", run)?;
    check_name("step", &request.step)?;
    check_name("state", &request.state)?;
    check_name("org", &request.org)?;
    if request.hold && request.kind != StepKind::Plan {
        return Err(Refusal::InvalidRequest {
            reason: "hold is only for a plan step's token".into(),
        }
        .into());
    }
    app.keys()?;
    let now = app.clock.now();
    // An org not created yet has the default allocation, which lets steps in.
    let allocation = app.allocation(&request.org).await?;
    for permission in [Permission::Read, Permission::Write] {
        if !allocation.allows(Role::Operator, permission) {
            return Err(Refusal::PermissionNotAllocated {
                reason: format!(
                    "{} is not allocated to the operator role in org {}, and a step acts as operator",
                    permission.as_str(),
                    request.org
                ),
            }
            .into());
        }
    }
    let stored = app
        .catalog
        .bind_run(&RunRecord {
            run: run.to_owned(),
            org: request.org.clone(),
            created_at: now,
            ended_at: None,
            status: None,
        })
        .await?;
    if stored.ended_at.is_some() {
        return Err(Refusal::RunEnded {
            run: run.to_owned(),
        }
        .into());
    }
    if stored.org != request.org {
        return Err(Refusal::RunOrgMismatch {
            run: run.to_owned(),
        }
        .into());
    }
    // An org is created by its first token or mint: only once nothing refuses the mint, so
    // a refused one leaves no org behind.
    app.catalog
        .create_org(&OrgRecord {
            inventory_key: None,
            org: request.org.clone(),
            allocation: Allocation::default(),
            created_at: now,
            protections: Vec::new(),
        })
        .await?;
    // Any positive timeout is accepted; past the cap it changes nothing, so clamp it before
    // adding the margin, which cannot then overflow whatever number the request carried.
    let cap = MAX_TOKEN_LIFETIME.whole_seconds().unsigned_abs();
    let timeout = Duration::seconds(request.timeout_seconds.min(cap) as i64);
    let lifetime = (timeout + TOKEN_MARGIN).min(MAX_TOKEN_LIFETIME);
    let grant = StepGrant {
        token_id: String::new(),
        run: run.to_owned(),
        step: request.step.clone(),
        attempt: request.attempt,
        state: request.state.clone(),
        kind: request.kind,
        hold: request.hold,
        expires_at: now + lifetime,
        token_hash: String::new(),
    };
    let new = NewToken::Step {
        org: &request.org,
        grant,
    };
    tokens::create(app.catalog.as_ref(), new, &Actor::Platform, now).await
}

/// Records a run's end (when received; an unknown run too; twice is the same) and lowers
/// the liveness of every lock its step tokens hold to the end plus the grace.
///
/// # Errors
/// `Refused` for an illegal run id; `Unavailable` on storage faults.
pub async fn end(app: &App, run: &str, status: Option<&str>) -> Result<RunRecord, Error> {
    check_name("run", run)?;
    let record = app.catalog.end_run(run, app.clock.now(), status).await?;
    let ended = record.ended_at.expect("end_run records an end");
    let until = ended + app.limits.run_end_grace;
    // Read after the end is recorded: a lock committing for this run either is already
    // among the items, or finds the end and fails (`StepCheck`), deciding again within it.
    let items = app.catalog.run_items(run).await?;
    for item in &items {
        lower_liveness(app, &item.org, &item.state, &item.token_id, until).await?;
    }
    for (org, state) in states_of(&items) {
        end_hold(app, org, state, run).await?;
    }
    Ok(record)
}

/// The states a run's steps locked, each once.
pub(super) fn states_of(items: &[RunItem]) -> Vec<(&str, &str)> {
    let mut states: Vec<(&str, &str)> = items
        .iter()
        .map(|i| (i.org.as_str(), i.state.as_str()))
        .collect();
    states.sort_unstable();
    states.dedup();
    states
}

/// A step's container is gone: revokes that attempt's token(s) only, and ends their locks'
/// liveness now. Returns how many tokens it revoked.
///
/// # Errors
/// `Refused` for illegal ids; `Unavailable` on storage faults.
pub async fn gone(app: &App, run: &str, step: &str, attempt: u32) -> Result<usize, Error> {
    check_name("run", run)?;
    check_name("step", step)?;
    let now = app.clock.now();
    let tokens: Vec<TokenRecord> = app
        .catalog
        .run_tokens(run)
        .await?
        .into_iter()
        .filter(|t| {
            t.step
                .as_ref()
                .is_some_and(|g| g.step == step && g.attempt == attempt)
        })
        .collect();
    let revoked = tokens.len();
    let mut ids = Vec::with_capacity(revoked);
    for token in tokens {
        let token =
            tokens::revoke_record(app.catalog.as_ref(), token, &Actor::Platform, now).await?;
        ids.push(token.id);
    }
    // Read after the revocations: a lock committing with one of these tokens either is
    // already among the items, or finds its token revoked and fails (`StepCheck`).
    let items = app.catalog.run_items(run).await?;
    for item in items.iter().filter(|i| ids.contains(&i.token_id)) {
        lower_liveness(app, &item.org, &item.state, &item.token_id, now).await?;
    }
    Ok(revoked)
}

/// Ends `run`'s hold on one state, if it holds it, with a revision-checked write; returns
/// whether it ended one.
pub(super) async fn end_hold(app: &App, org: &str, state: &str, run: &str) -> Result<bool, Error> {
    until_done(|| async {
        let Some(snapshot) = app.catalog.state(org, state).await? else {
            return Ok(Attempt::Done(false));
        };
        if snapshot.hold.as_ref().is_none_or(|h| h.run != run) {
            return Ok(Attempt::Done(false));
        }
        let mut next = snapshot.successor();
        next.hold = None;
        let next = (!(next.lock.is_none() && next.is_lock_only())).then_some(next);
        commit(app, Commit::over(&snapshot, app.clock.now(), next), true).await
    })
    .await
}

/// Lowers the liveness of `token`'s lock on one state to `until` (never raises it), with a
/// revision-checked write.
pub(super) async fn lower_liveness(
    app: &App,
    org: &str,
    state: &str,
    token: &str,
    until: Timestamp,
) -> Result<(), Error> {
    until_done(|| async {
        let Some(snapshot) = app.catalog.state(org, state).await? else {
            return Ok(Attempt::Done(()));
        };
        let Some(lock) = snapshot
            .lock
            .as_ref()
            .filter(|l| l.token.as_deref() == Some(token))
        else {
            return Ok(Attempt::Done(()));
        };
        if lock.live_until.is_some_and(|t| t <= until) {
            return Ok(Attempt::Done(()));
        }
        let mut next = snapshot.successor();
        if let Some(lock) = next.lock.as_mut() {
            lock.live_until = Some(until);
        }
        commit(
            app,
            Commit::over(&snapshot, app.clock.now(), Some(next)),
            (),
        )
        .await
    })
    .await
}
