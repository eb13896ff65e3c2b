//! The single-table layout (DESIGN section 9): how each record is keyed, which sparse index
//! finds it, and the codecs between records and DynamoDB items. Records travel as one JSON
//! attribute (`rec`); only what a key condition, a compare-and-swap, a condition check or an
//! index needs is an attribute of its own.
//!
//! | record        | pk                                | sk                    | index  |
//! |---------------|-----------------------------------|-----------------------|--------|
//! | state         | `ORG#<org>`                       | `STATE#<name>`        |        |
//! | app state     | `ORG#<org>`                       | `APP#<name>`          |        |
//! | deleted state | `ORG#<org>`                       | `DELETED#<id>`        | sweep `deleted` (by purge date) |
//! | archive       | `APPARC#<org>/<name>`             | commit ID             |        |
//! | org settings  | `ORG#<org>`                       | `SETTINGS`            |        |
//! | version       | `VER#<org>/<home>/<incarnation>`  | version, 20 digits    |        |
//! | audit entry   | `AUDIT#<org>`                     | sequence, 20 digits   |        |
//! | token         | `TOKEN#<hash>`                    | `-`                   | listing (all), sweep `token` (expiring) |
//! | run           | `RUN#<run>`                       | `RUN`                 | sweep `ended_run` until tidied, then `settled_run` until pruned |
//! | run item      | `RUN#<run>`                       | `ITEM#<token>#<org>/<state>` |  |
//! | run token     | `RUN#<run>`                       | `TOKEN#<hash>`        |        |
//! | pending blob  | `PENDING#<blob>`                  | `-`                   | sweep `pending` |
//! | doomed blob   | `DOOMED#<blob>`                   | `-`                   | sweep `doomed` |
//! | version mark  | `MARK#<org>/<home>/<incarnation>` | `-`                   | sweep `mark` |
//! | exchanged ID token | `EXCHANGED#<digest>`         | `-`                   | (TTL)  |
//! | issuer's keys | `ISSUERKEYS#<issuer>`             | `-`                   |        |
//!
//! Trust policies and protected states keep their own items (`trust.rs`, `protection.rs`).
//!
//! A state's versions are keyed by its home (`StateRecord::home`): the name its incarnation
//! was created under, which a restore under another name keeps.
//!
//! An inline version's sealed content is the binary attribute `body` of its version item,
//! and, while it is the latest, of its state item too, so a read of the state is one
//! `GetItem`. Listings project it away.
//!
//! Names of orgs, states, runs and incarnations never contain `/` or `#`, so keys built from
//! them cannot collide.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::domain::deleted::DeletedState;
use crate::domain::Timestamp;
use crate::ports::StoreError;

pub type Item = HashMap<String, AttributeValue>;

pub const PK: &str = "pk";
pub const SK: &str = "sk";
/// The JSON of the record an item holds.
pub const REC: &str = "rec";
/// An inline version's sealed content (binary).
pub const BODY: &str = "body";
/// A state record's revision: the compare-and-swap condition.
pub const REV: &str = "rev";
/// When DynamoDB may delete the item on its own (a backstop for expired tokens).
pub const TTL: &str = "expires";
/// On a run's item, its end (nanoseconds since the epoch); on a token's, that it is revoked:
/// what a step's lock commits on (`ports::StepCheck`).
pub const ENDED: &str = "ended";
pub const REVOKED: &str = "revoked";

/// The sparse index the sweeper reads: one partition per kind of work, sorted by age.
pub const SWEEP_INDEX: &str = "sweep";
pub const SWEEP_PK: &str = "sweep_pk";
pub const SWEEP_SK: &str = "sweep_sk";
/// The sparse index that lists every token (for `token list`).
pub const LISTING_INDEX: &str = "listing";
pub const LISTING_PK: &str = "list_pk";
pub const LISTING_SK: &str = "list_sk";

/// The sweeper's kinds of work.
pub const SWEEP_PENDING: &str = "pending";
pub const SWEEP_DOOMED: &str = "doomed";
pub const SWEEP_MARK: &str = "mark";
/// Deleted states by delete time.
pub const SWEEP_DELETED: &str = "deleted_at";
/// Deleted states by the purge date an older build gave them (the retention in force at
/// the delete): read whole by the sweeper, due by their delete time, until none is left.
pub const SWEEP_DELETED_BY_PURGE: &str = "deleted";
pub const SWEEP_TOKEN: &str = "token";
pub const SWEEP_ENDED_RUN: &str = "ended_run";
pub const SWEEP_SETTLED_RUN: &str = "settled_run";
pub const LISTING_TOKENS: &str = "tokens";

/// The sort key of items with one item per partition.
pub const ONLY: &str = "-";

pub fn org_pk(org: &str) -> String {
    format!("ORG#{org}")
}
pub fn state_sk(name: &str) -> String {
    format!("STATE#{name}")
}
pub const SETTINGS_SK: &str = "SETTINGS";
pub fn deleted_sk(id: &str) -> String {
    format!("DELETED#{id}")
}
pub fn versions_pk(org: &str, name: &str, incarnation: &str) -> String {
    format!("VER#{org}/{name}/{incarnation}")
}
pub fn number_sk(n: u64) -> String {
    format!("{n:020}")
}
/// The partitions of an org's trust policies start so.
pub const TRUST_PREFIX: &str = "TRUST#";
pub fn audit_pk(org: &str) -> String {
    format!("AUDIT#{org}")
}
pub fn token_pk(hash: &str) -> String {
    format!("TOKEN#{hash}")
}
/// What the deployment keeps of an issuer's keys. An issuer is at most 512 bytes (a
/// policy's and a token's bound), well inside a partition key's 2,048.
pub fn issuer_keys_pk(issuer: &str) -> String {
    format!("ISSUERKEYS#{issuer}")
}
/// An exchanged ID token's mark, by its key (a hex digest).
pub fn exchanged_pk(key: &str) -> String {
    format!("EXCHANGED#{key}")
}
pub fn run_pk(run: &str) -> String {
    format!("RUN#{run}")
}
pub const RUN_SK: &str = "RUN";
pub const RUN_ITEM_PREFIX: &str = "ITEM#";
pub const RUN_TOKEN_PREFIX: &str = "TOKEN#";
pub fn pending_pk(blob: &str) -> String {
    format!("PENDING#{blob}")
}
pub fn doomed_pk(blob: &str) -> String {
    format!("DOOMED#{blob}")
}
pub fn mark_pk(org: &str, name: &str, incarnation: &str) -> String {
    format!("MARK#{org}/{name}/{incarnation}")
}

/// A sweep sort key: seconds since the epoch, fixed width so text order is time order, then
/// what makes it unique. `age_below(t)` sorts before every key of a time `>= t`.
pub fn age_sk(at: Timestamp, unique: &str) -> String {
    format!("{}#{unique}", age_below(at))
}
pub fn age_below(at: Timestamp) -> String {
    format!("{:012}", at.unix_timestamp().max(0))
}

/// The record of a blob listed for deletion at `at`.
pub fn doomed_item(blob: &str, at: Timestamp) -> Item {
    let mut item = key(doomed_pk(blob), ONLY);
    item.insert("blob".into(), s(blob));
    item.insert(SWEEP_PK.into(), s(SWEEP_DOOMED));
    item.insert(SWEEP_SK.into(), s(age_sk(at, blob)));
    item
}

/// The item of a deleted state: its record, its revision (what a restore and a purge are
/// conditioned on), and its place in the sweep index by delete time (the sweeper adds the
/// retention in force).
pub fn deleted_item(deleted: &DeletedState) -> Item {
    let mut item = record_item(org_pk(&deleted.org), deleted_sk(&deleted.id), deleted);
    item.insert(REV.into(), n(deleted.revision));
    item.insert(SWEEP_PK.into(), s(SWEEP_DELETED));
    item.insert(
        SWEEP_SK.into(),
        s(age_sk(
            deleted.deleted_at,
            &format!("{}/{}", deleted.org, deleted.id),
        )),
    );
    item
}

/// The version mark of an incarnation stored under `home`: its versions below `below` go.
pub fn mark_item(org: &str, home: &str, incarnation: &str, below: u64) -> Item {
    let mut item = key(mark_pk(org, home, incarnation), ONLY);
    item.insert("org".into(), s(org));
    item.insert("name".into(), s(home));
    item.insert("incarnation".into(), s(incarnation));
    item.insert("below".into(), n(below));
    item.insert(SWEEP_PK.into(), s(SWEEP_MARK));
    item.insert(SWEEP_SK.into(), s(mark_pk(org, home, incarnation)));
    item
}

/// A time as a number a condition can compare: nanoseconds since the epoch.
pub fn nanos(at: Timestamp) -> AttributeValue {
    AttributeValue::N(at.unix_timestamp_nanos().to_string())
}

pub fn s(value: impl Into<String>) -> AttributeValue {
    AttributeValue::S(value.into())
}
pub fn n(value: u64) -> AttributeValue {
    AttributeValue::N(value.to_string())
}

/// The key of an item.
pub fn key(pk: String, sk: impl Into<String>) -> Item {
    HashMap::from([(PK.to_owned(), s(pk)), (SK.to_owned(), s(sk))])
}

/// An item holding `record` as JSON under `pk`/`sk`.
pub fn record_item<T: Serialize>(pk: String, sk: impl Into<String>, record: &T) -> Item {
    let mut item = key(pk, sk);
    item.insert(REC.to_owned(), s(to_json(record)));
    item
}

pub fn to_json<T: Serialize>(record: &T) -> String {
    serde_json::to_string(record).expect("records serialize to JSON")
}

/// The record an item holds.
pub fn record<T: DeserializeOwned>(item: &Item) -> Result<T, StoreError> {
    let text = string(item, REC)?;
    serde_json::from_str(text).map_err(|e| {
        StoreError::Corrupt(format!(
            "the catalog item {} holds an unreadable record: {e}",
            describe(item)
        ))
    })
}

/// A string attribute an item must have.
pub fn string<'a>(item: &'a Item, name: &str) -> Result<&'a str, StoreError> {
    match item.get(name) {
        Some(AttributeValue::S(v)) => Ok(v),
        _ => Err(StoreError::Corrupt(format!(
            "the catalog item {} has no string {name}",
            describe(item)
        ))),
    }
}

/// A binary attribute an item may have.
pub fn binary(item: &Item, name: &str) -> Option<Vec<u8>> {
    match item.get(name) {
        Some(AttributeValue::B(v)) => Some(v.clone().into_inner()),
        _ => None,
    }
}

/// A number attribute an item must have.
pub fn number(item: &Item, name: &str) -> Result<u64, StoreError> {
    match item.get(name) {
        Some(AttributeValue::N(v)) => v.parse().map_err(|_| {
            StoreError::Corrupt(format!(
                "the catalog item {} has a non-integer {name}",
                describe(item)
            ))
        }),
        _ => Err(StoreError::Corrupt(format!(
            "the catalog item {} has no number {name}",
            describe(item)
        ))),
    }
}

/// An item's key, for error messages (keys hold ids and names, never secrets).
fn describe(item: &Item) -> String {
    let part = |name| match item.get(name) {
        Some(AttributeValue::S(v)) => v.as_str(),
        _ => "?",
    };
    format!("{}/{}", part(PK), part(SK))
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    #[test]
    fn age_keys_sort_by_time_and_below_excludes_the_same_second() {
        let t = datetime!(2026-11-30 01:00:00 UTC);
        let earlier = age_sk(t - time::Duration::seconds(1), "zzz");
        let same = age_sk(t, "aaa");
        assert!(earlier < age_below(t));
        assert!(
            same > age_below(t),
            "a key of the same second is not below it"
        );
        assert!(age_below(t) < age_sk(t + time::Duration::seconds(1), ""));
    }

    #[test]
    fn numbers_sort_as_text() {
        assert!(number_sk(9) < number_sk(10));
        assert!(number_sk(10) < number_sk(u64::MAX));
    }

    #[test]
    fn a_record_round_trips_and_damage_is_reported_with_the_key() {
        let item = record_item("ORG#acme".into(), "SETTINGS", &vec![1, 2]);
        assert_eq!(record::<Vec<u8>>(&item).unwrap(), [1, 2]);
        let mut broken = item.clone();
        broken.insert(REC.into(), s("{"));
        let err = record::<Vec<u8>>(&broken).unwrap_err().to_string();
        assert!(err.contains("ORG#acme/SETTINGS"), "{err}");
    }
}
