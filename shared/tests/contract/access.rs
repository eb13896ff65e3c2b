//! The access port's cases of the contract (included by ../contract.rs): tokens found by
//! hash, orgs created once and their allocation compared and swapped.

use super::*;
use hegemony_state::domain::permission::{Allocation, Role};
use hegemony_state::ports::{ExchangeMark, OrgRecord, TokenKind, TokenRecord};

pub async fn tokens_are_found_by_hash(f: Fixture) {
    let token = TokenRecord {
        hash: "ab".repeat(32),
        id: "tok-1".into(),
        kind: TokenKind::Personal,
        org: "acme".into(),
        user: "alice".into(),
        role: Role::Operator,
        created_at: NOW,
        expires_at: None,
        revoked: false,
        step: None,
        session: None,
    };
    f.catalog
        .put_token(&token, &audit("acme", "token.created"))
        .await
        .unwrap();
    assert_eq!(
        f.catalog.token(&token.hash).await.unwrap(),
        Some(token.clone())
    );
    assert!(f.catalog.token(&"cd".repeat(32)).await.unwrap().is_none());
    let revoked = TokenRecord {
        revoked: true,
        ..token.clone()
    };
    f.catalog
        .put_token(&revoked, &audit("acme", "token.revoked"))
        .await
        .unwrap();
    assert!(f.catalog.token(&token.hash).await.unwrap().unwrap().revoked);
    assert_eq!(f.catalog.tokens().await.unwrap(), vec![revoked]);
    let actions: Vec<_> = f
        .catalog
        .audit("acme", &query(10))
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.entry.action)
        .collect();
    assert_eq!(
        actions,
        ["token.revoked", "token.created"],
        "each with its audit entry"
    );
}

pub async fn an_org_is_created_once(f: Fixture) {
    let org = OrgRecord {
        inventory_key: None,
        org: "acme".into(),
        allocation: Allocation::default(),
        created_at: NOW,
        protections: Vec::new(),
    };
    assert!(f.catalog.create_org(&org).await.unwrap());
    let other = OrgRecord {
        allocation: Allocation {
            read: None,
            ..Allocation::default()
        },
        ..org.clone()
    };
    assert!(!f.catalog.create_org(&other).await.unwrap());
    assert_eq!(f.catalog.org("acme").await.unwrap(), Some(org.clone()));
    assert!(f.catalog.org("nobody").await.unwrap().is_none());
    f.catalog
        .set_allocation(
            "acme",
            &Allocation::default(),
            &other.allocation,
            &audit("acme", "permissions.changed"),
        )
        .await
        .unwrap();
    assert_eq!(
        f.catalog.org("acme").await.unwrap().unwrap().allocation,
        other.allocation
    );
    assert_eq!(f.catalog.audit("acme", &query(10)).await.unwrap().len(), 1);
    // A change decided on an allocation that is no longer stored loses the race and
    // writes nothing, neither the allocation nor its audit entry.
    let stale = f
        .catalog
        .set_allocation(
            "acme",
            &Allocation::default(),
            &Allocation {
                write: None,
                ..Allocation::default()
            },
            &audit("acme", "permissions.changed"),
        )
        .await;
    assert!(matches!(stale, Err(StoreError::Conflict)), "{stale:?}");
    assert_eq!(
        f.catalog.org("acme").await.unwrap().unwrap().allocation,
        other.allocation
    );
    assert_eq!(f.catalog.audit("acme", &query(10)).await.unwrap().len(), 1);
    // An org not created yet has the default allocation to compare with.
    let stale_new = f
        .catalog
        .set_allocation(
            "fresh",
            &other.allocation,
            &Allocation::default(),
            &audit("fresh", "permissions.changed"),
        )
        .await;
    assert!(matches!(stale_new, Err(StoreError::Conflict)));
    assert!(f.catalog.org("fresh").await.unwrap().is_none());
}

/// A workload session is stored with its ID token's mark in one write: a second session
/// for the same mark is a conflict that writes nothing (neither its token nor its audit
/// entry), and a mark past its time no longer stands in the way.
pub async fn an_id_token_opens_one_session(f: Fixture) {
    let session = |hash: &str| TokenRecord {
        hash: hash.repeat(32),
        id: format!("tok-{hash}"),
        kind: TokenKind::Session,
        org: "acme".into(),
        user: "workload job".into(),
        role: Role::Operator,
        created_at: NOW,
        expires_at: Some(NOW + time::Duration::hours(1)),
        revoked: false,
        step: None,
        session: None,
    };
    let mark = ExchangeMark {
        key: "ab".repeat(32),
        until: NOW + time::Duration::minutes(6),
    };
    let opened = audit("acme", "workload_session.opened");
    f.catalog
        .put_session(&session("a1"), &mark, &opened, NOW)
        .await
        .unwrap();
    assert!(f.catalog.token(&"a1".repeat(32)).await.unwrap().is_some());
    let again = f
        .catalog
        .put_session(
            &session("b2"),
            &mark,
            &opened,
            NOW + time::Duration::minutes(5),
        )
        .await;
    assert!(matches!(again, Err(StoreError::Conflict)), "{again:?}");
    assert!(f.catalog.token(&"b2".repeat(32)).await.unwrap().is_none());
    assert_eq!(f.catalog.audit("acme", &query(10)).await.unwrap().len(), 1);
    // Another token's mark is its own.
    let other = ExchangeMark {
        key: "cd".repeat(32),
        ..mark.clone()
    };
    f.catalog
        .put_session(&session("c3"), &other, &opened, NOW)
        .await
        .unwrap();
    // Once the mark's time has passed (the token is refused by its exp anyway), it is
    // replaced rather than refusing.
    let later = NOW + time::Duration::minutes(7);
    let renewed = ExchangeMark {
        until: later + time::Duration::minutes(6),
        ..mark.clone()
    };
    f.catalog
        .put_session(&session("d4"), &renewed, &opened, later)
        .await
        .unwrap();
    let refused = f
        .catalog
        .put_session(&session("e5"), &renewed, &opened, later)
        .await;
    assert!(matches!(refused, Err(StoreError::Conflict)), "{refused:?}");
}

/// Every org with a record of any kind is listed once, in order, whatever kind of record
/// names it: a state, settings, a trust policy, a token, an audit entry alone.
pub async fn every_org_with_a_record_is_listed(f: Fixture) {
    assert_eq!(f.catalog.orgs().await.unwrap(), Vec::<String>::new());
    let state = StateRecord::fresh("with-state", "net", "inc", NOW);
    f.catalog.commit(commit(&state, 0, vec![])).await.unwrap();
    let settings = OrgRecord {
        inventory_key: None,
        org: "with-settings".into(),
        allocation: Allocation::default(),
        created_at: NOW,
        protections: Vec::new(),
    };
    f.catalog.create_org(&settings).await.unwrap();
    let policy = hegemony_state::domain::trust::TrustPolicy {
        name: "ci".into(),
        issuer: "https://issuer.example.com".into(),
        audience: "https://state.example.com/orgs/with-policy".into(),
        claims: Default::default(),
        role: Role::Operator,
        states: vec!["*".into()],
        session_seconds: 600,
    };
    f.catalog
        .put_trust_policy(
            "with-policy",
            None,
            &policy,
            &audit("with-policy", "trust_policy.created"),
        )
        .await
        .unwrap();
    let token = TokenRecord {
        hash: "ab".repeat(32),
        id: "tok-1".into(),
        kind: TokenKind::Personal,
        org: "with-token".into(),
        user: "alice".into(),
        role: Role::Operator,
        created_at: NOW,
        expires_at: None,
        revoked: false,
        step: None,
        session: None,
    };
    f.catalog
        .put_token(&token, &audit("with-token", "token.created"))
        .await
        .unwrap();
    f.catalog
        .append_audit(&audit("with-audit", "store.migrated"))
        .await
        .unwrap();
    assert_eq!(
        f.catalog.orgs().await.unwrap(),
        [
            "with-audit",
            "with-policy",
            "with-settings",
            "with-state",
            "with-token"
        ]
    );
}
