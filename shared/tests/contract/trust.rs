//! The trust port's cases of the contract (included by ../contract.rs): policies listed by
//! org and found by issuer, replaced and removed only as read, and an (issuer, audience)
//! pair held by one org at a time.

use super::*;
use hegemony_state::domain::permission::Role;
use hegemony_state::domain::trust::TrustPolicy;
use hegemony_state::ports::{TrustRecord, TrustWrite};
use std::collections::BTreeMap;

const GITHUB: &str = "https://token.actions.githubusercontent.com";

fn policy(name: &str, issuer: &str, audience: &str) -> TrustPolicy {
    TrustPolicy {
        name: name.into(),
        issuer: issuer.into(),
        audience: audience.into(),
        claims: BTreeMap::from([("repository_id".into(), "123".into())]),
        role: Role::Operator,
        states: vec!["net-*".into()],
        session_seconds: 3600,
    }
}

fn record(org: &str, policy: &TrustPolicy) -> TrustRecord {
    TrustRecord {
        org: org.into(),
        policy: policy.clone(),
    }
}

pub async fn trust_policies_are_listed_by_org_and_found_by_issuer(f: Fixture) {
    let deploy = policy("deploy", GITHUB, "state");
    let plan = policy("plan", GITHUB, "state");
    let gitlab = policy("gitlab", "https://gitlab.example.com", "state");
    for p in [&plan, &deploy, &gitlab] {
        let written = f
            .catalog
            .put_trust_policy("acme", None, p, &audit("acme", "trust_policy.created"))
            .await
            .unwrap();
        assert_eq!(written, TrustWrite::Written);
    }
    let names: Vec<String> = f
        .catalog
        .trust_policies("acme")
        .await
        .unwrap()
        .into_iter()
        .map(|p| p.name)
        .collect();
    assert_eq!(names, ["deploy", "gitlab", "plan"]);
    assert!(f.catalog.trust_policies("other").await.unwrap().is_empty());
    let mut found = f.catalog.trust_policies_of_issuer(GITHUB).await.unwrap();
    found.sort_by(|a, b| a.policy.name.cmp(&b.policy.name));
    assert_eq!(found, vec![record("acme", &deploy), record("acme", &plan)]);
    assert!(f
        .catalog
        .trust_policies_of_issuer("https://token.actions.githubusercontent.com/")
        .await
        .unwrap()
        .is_empty());
    let actions = f.catalog.audit("acme", &query(10)).await.unwrap();
    assert_eq!(actions.len(), 3, "each write with its audit entry");
}

pub async fn a_trust_policy_is_replaced_and_removed_only_as_read(f: Fixture) {
    let first = policy("deploy", GITHUB, "state");
    f.catalog
        .put_trust_policy("acme", None, &first, &audit("acme", "trust_policy.created"))
        .await
        .unwrap();
    assert!(matches!(
        f.catalog
            .put_trust_policy("acme", None, &first, &audit("acme", "x"))
            .await,
        Err(StoreError::Conflict)
    ));
    let moved = policy("deploy", "https://gitlab.example.com", "other");
    f.catalog
        .put_trust_policy(
            "acme",
            Some(&first),
            &moved,
            &audit("acme", "trust_policy.changed"),
        )
        .await
        .unwrap();
    assert!(matches!(
        f.catalog
            .put_trust_policy("acme", Some(&first), &first, &audit("acme", "x"))
            .await,
        Err(StoreError::Conflict)
    ));
    assert!(f
        .catalog
        .trust_policies_of_issuer(GITHUB)
        .await
        .unwrap()
        .is_empty());
    assert_eq!(
        f.catalog
            .trust_policies_of_issuer("https://gitlab.example.com")
            .await
            .unwrap(),
        vec![record("acme", &moved)]
    );
    assert!(matches!(
        f.catalog
            .delete_trust_policy("acme", &first, &audit("acme", "x"))
            .await,
        Err(StoreError::Conflict)
    ));
    f.catalog
        .delete_trust_policy("acme", &moved, &audit("acme", "trust_policy.deleted"))
        .await
        .unwrap();
    assert!(f.catalog.trust_policies("acme").await.unwrap().is_empty());
    assert!(f
        .catalog
        .trust_policies_of_issuer("https://gitlab.example.com")
        .await
        .unwrap()
        .is_empty());
    let actions: Vec<String> = f
        .catalog
        .audit("acme", &query(10))
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.entry.action)
        .collect();
    assert_eq!(
        actions,
        [
            "trust_policy.deleted",
            "trust_policy.changed",
            "trust_policy.created"
        ],
        "a refused write audits nothing"
    );
}

pub async fn an_issuer_and_audience_pair_belongs_to_one_org(f: Fixture) {
    let acme = policy("deploy", GITHUB, "state");
    let second = policy("plan", GITHUB, "state");
    for p in [&acme, &second] {
        f.catalog
            .put_trust_policy("acme", None, p, &audit("acme", "trust_policy.created"))
            .await
            .unwrap();
    }
    let theirs = policy("deploy", GITHUB, "state");
    assert_eq!(
        f.catalog
            .put_trust_policy("other", None, &theirs, &audit("other", "x"))
            .await
            .unwrap(),
        TrustWrite::PairTaken { org: "acme".into() }
    );
    assert!(f.catalog.trust_policies("other").await.unwrap().is_empty());
    assert!(f
        .catalog
        .audit("other", &query(10))
        .await
        .unwrap()
        .is_empty());
    // Another audience of the same issuer is another pair.
    let own_audience = policy("deploy", GITHUB, "other-audience");
    assert_eq!(
        f.catalog
            .put_trust_policy("other", None, &own_audience, &audit("other", "c"))
            .await
            .unwrap(),
        TrustWrite::Written
    );
    // The pair is acme's while any of its policies uses it: moving one away keeps it taken.
    let moved = policy("deploy", GITHUB, "elsewhere");
    f.catalog
        .put_trust_policy("acme", Some(&acme), &moved, &audit("acme", "m"))
        .await
        .unwrap();
    let retry = policy("second", GITHUB, "state");
    assert_eq!(
        f.catalog
            .put_trust_policy("other", None, &retry, &audit("other", "x"))
            .await
            .unwrap(),
        TrustWrite::PairTaken { org: "acme".into() }
    );
    f.catalog
        .delete_trust_policy("acme", &second, &audit("acme", "d"))
        .await
        .unwrap();
    assert_eq!(
        f.catalog
            .put_trust_policy("other", None, &retry, &audit("other", "c"))
            .await
            .unwrap(),
        TrustWrite::Written,
        "free once the last of acme's policies on it went"
    );
    assert_eq!(
        f.catalog
            .put_trust_policy("acme", None, &second, &audit("acme", "x"))
            .await
            .unwrap(),
        TrustWrite::PairTaken {
            org: "other".into()
        }
    );
}
