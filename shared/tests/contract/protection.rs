//! The protection port's cases of the contract (included by ../contract.rs): rules read with
//! the org's settings (every read of them, the backend's batch among them), written and
//! removed only as read, and never losing an allocation's change or losing to one.

use super::*;
use hegemony_state::domain::permission::{Allocation, Role};
use hegemony_state::domain::protection::Protection;

fn rule(pattern: &str, policies: &[&str]) -> Protection {
    Protection {
        pattern: pattern.into(),
        policies: policies.iter().map(|p| (*p).to_owned()).collect(),
    }
}

async fn rules_of(f: &Fixture, org: &str) -> Vec<Protection> {
    f.catalog
        .org(org)
        .await
        .unwrap()
        .map(|o| o.protections)
        .unwrap_or_default()
}

pub async fn protections_are_read_with_the_org_settings(f: Fixture) {
    let prod = rule("prod-*", &["deploy"]);
    let net = rule("core-net", &["deploy", "network"]);
    for r in [&prod, &net] {
        f.catalog
            .put_protection("acme", None, r, &audit("acme", "protection.set"))
            .await
            .unwrap();
    }
    // Written before the org had settings: they exist now, at the default allocation.
    let settings = f.catalog.org("acme").await.unwrap().unwrap();
    assert_eq!(settings.allocation, Allocation::default());
    assert_eq!(settings.protections, vec![net.clone(), prod.clone()]);
    let (org, _) = f.catalog.org_and_state("acme", "prod-db").await.unwrap();
    assert_eq!(org.unwrap().protections, vec![net.clone(), prod.clone()]);
    let (org, _) = f
        .catalog
        .org_and_state_with_content("acme", "prod-db")
        .await
        .unwrap();
    assert_eq!(org.unwrap().protections, vec![net, prod]);
    assert!(rules_of(&f, "other").await.is_empty());
    let actions: Vec<String> = f
        .catalog
        .audit("acme", &query(10))
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.entry.action)
        .collect();
    assert_eq!(actions, ["protection.set", "protection.set"]);
}

pub async fn a_protection_is_replaced_and_removed_only_as_read(f: Fixture) {
    let first = rule("prod-*", &["deploy"]);
    let second = rule("prod-*", &["deploy", "release"]);
    let set = audit("acme", "protection.set");
    f.catalog
        .put_protection("acme", None, &first, &set)
        .await
        .unwrap();
    assert!(matches!(
        f.catalog.put_protection("acme", None, &second, &set).await,
        Err(StoreError::Conflict)
    ));
    assert!(matches!(
        f.catalog
            .put_protection("acme", Some(&second), &second, &set)
            .await,
        Err(StoreError::Conflict)
    ));
    f.catalog
        .put_protection("acme", Some(&first), &second, &set)
        .await
        .unwrap();
    assert_eq!(rules_of(&f, "acme").await, vec![second.clone()]);
    // An allocation's change keeps the rules, and a rule's change keeps the allocation.
    let allocation = Allocation {
        write: Some(Role::Admin),
        ..Allocation::default()
    };
    f.catalog
        .set_allocation(
            "acme",
            &Allocation::default(),
            &allocation,
            &audit("acme", "permissions.changed"),
        )
        .await
        .unwrap();
    assert_eq!(rules_of(&f, "acme").await, vec![second.clone()]);
    let removed = audit("acme", "protection.removed");
    assert!(matches!(
        f.catalog.delete_protection("acme", &first, &removed).await,
        Err(StoreError::Conflict)
    ));
    f.catalog
        .delete_protection("acme", &second, &removed)
        .await
        .unwrap();
    let settings = f.catalog.org("acme").await.unwrap().unwrap();
    assert_eq!(
        (settings.allocation, settings.protections),
        (allocation, vec![])
    );
    assert!(matches!(
        f.catalog.delete_protection("acme", &second, &removed).await,
        Err(StoreError::Conflict)
    ));
}
