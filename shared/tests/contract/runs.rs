//! The runs port's cases of the contract (included by ../contract.rs): a step's lock commits
//! only while its token is unrevoked and its run has not ended too early, and the run's items
//! find it.

use super::*;
use hegemony_state::domain::permission::Role;
use hegemony_state::ports::{TokenKind, TokenRecord};

/// A step's lock commits only while its token is unrevoked and its run has not ended
/// before `ended_not_before`; a run ended at or after it, or not at all, lets it through.
pub async fn a_steps_commit_checks_its_token_and_its_runs_end(f: Fixture) {
    use hegemony_state::domain::actor::{StepGrant, StepKind};
    use hegemony_state::ports::{RunItem, RunRecord, StepCheck};
    let grant = StepGrant {
        token_id: "tok-s".into(),
        run: "r1".into(),
        step: "apply".into(),
        attempt: 1,
        state: "net".into(),
        kind: StepKind::Apply,
        hold: false,
        expires_at: NOW + time::Duration::hours(1),
        token_hash: String::new(),
    };
    let token = TokenRecord {
        hash: "ef".repeat(32),
        id: "tok-s".into(),
        kind: TokenKind::Step,
        org: "acme".into(),
        user: String::new(),
        role: Role::Operator,
        created_at: NOW,
        expires_at: Some(grant.expires_at),
        revoked: false,
        step: Some(grant),
        session: None,
    };
    f.catalog
        .put_token(&token, &audit("acme", "token.created"))
        .await
        .unwrap();
    f.catalog
        .bind_run(&RunRecord {
            run: "r1".into(),
            org: "acme".into(),
            created_at: NOW,
            ended_at: None,
            status: None,
        })
        .await
        .unwrap();
    let record = StateRecord::fresh("acme", "net", "inc1", NOW);
    let step_commit = |expected: u64, not_before: Timestamp| Commit {
        run_items: vec![RunItem {
            run: "r1".into(),
            token_id: "tok-s".into(),
            org: "acme".into(),
            state: "net".into(),
        }],
        step: Some(StepCheck {
            run: "r1".into(),
            token_hash: token.hash.clone(),
            ended_not_before: not_before,
        }),
        ..commit(&record, expected, Vec::new())
    };
    let later = NOW + time::Duration::minutes(50);
    f.catalog.commit(step_commit(0, later)).await.unwrap();
    let ended = NOW + time::Duration::minutes(10);
    f.catalog.end_run("r1", ended, None).await.unwrap();
    assert!(
        matches!(
            f.catalog.commit(step_commit(1, later)).await,
            Err(StoreError::Conflict)
        ),
        "the run ended before the lock's liveness less the grace"
    );
    f.catalog.commit(step_commit(1, ended)).await.unwrap();
    let revoked = TokenRecord {
        revoked: true,
        ..token.clone()
    };
    f.catalog
        .put_token(&revoked, &audit("acme", "token.revoked"))
        .await
        .unwrap();
    assert!(
        matches!(
            f.catalog.commit(step_commit(2, NOW)).await,
            Err(StoreError::Conflict)
        ),
        "the token was revoked"
    );
    assert_eq!(
        f.catalog
            .state("acme", "net")
            .await
            .unwrap()
            .unwrap()
            .revision,
        2
    );
    assert_eq!(f.catalog.run_items("r1").await.unwrap().len(), 1);
}

/// Every run is listed, ended or not, one bound by a mint and one only ever reported ended.
pub async fn every_run_is_listed_with_its_end(f: Fixture) {
    use hegemony_state::ports::RunRecord;
    assert!(f.catalog.runs().await.unwrap().is_empty());
    let bound = RunRecord {
        run: "r1".into(),
        org: "acme".into(),
        created_at: NOW,
        ended_at: None,
        status: None,
    };
    f.catalog.bind_run(&bound).await.unwrap();
    let ended = f
        .catalog
        .end_run("r2", NOW + time::Duration::minutes(1), Some("failed"))
        .await
        .unwrap();
    let mut runs = f.catalog.runs().await.unwrap();
    runs.sort_by(|a, b| a.run.cmp(&b.run));
    assert_eq!(runs, [bound, ended]);
}
