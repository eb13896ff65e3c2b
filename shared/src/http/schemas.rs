//! The schemas of every body the API answers with, derived from the types the handlers
//! serialize (`schemars` follows their serde attributes, so a schema is the wire form and a
//! new field reaches the document, and the types generated from it, by being written once).
//! What a request body may hold stays written by hand in `openapi.json`: the handlers read
//! those field by field, with the limits and messages of the domain's parsers.

use schemars::generate::SchemaSettings;
use schemars::{JsonSchema, SchemaGenerator};
use serde_json::{Map, Value};

use super::admin::KeyReport;
use super::app_changes::AppForceUnlockResult;
use super::inventory::{ConflictList, ResourceList};
use super::list::VersionList;
use super::manage::ForceUnlockResult;
use super::runs::{GoneReport, Minted, RunEnded};
use crate::domain::outputs::OutputsView;
use crate::domain::permission::Allocation;
use crate::domain::protection::Protection;
use crate::domain::trust::TrustPolicy;
use crate::service::admin::AuditPage;
use crate::service::app_reads::{AppListing, AppView, ArchiveListing, ArchiveView, ChangeView};
use crate::service::app_reads::{FileView, HeldLockView};
use crate::service::comparison::VersionComparison;
use crate::service::deleted::{DeletedStateList, DeletedStateView, Restored};
use crate::service::identity::Identity;
use crate::service::listing::{Listing, StateView, VersionView};
use crate::service::overview::Overview;
use crate::service::protection::Protections;
use crate::service::trust::TrustPolicies;
use crate::service::workload::Session;

/// Where the document keeps its schemas, as a JSON pointer.
const SCHEMAS: &str = "/components/schemas";

/// Every answered body's schema, and those they refer to, by the name the document gives it.
pub fn derived() -> Map<String, Value> {
    let mut generator = SchemaSettings::draft2020_12()
        .with(|s| s.definitions_path = SCHEMAS.into())
        .for_serialize()
        .into_generator();
    add::<Listing>(&mut generator);
    add::<StateView>(&mut generator);
    add::<VersionList>(&mut generator);
    add::<VersionView>(&mut generator);
    add::<VersionComparison>(&mut generator);
    add::<OutputsView>(&mut generator);
    add::<ForceUnlockResult>(&mut generator);
    add::<AuditPage>(&mut generator);
    add::<KeyReport<'_>>(&mut generator);
    add::<DeletedStateList>(&mut generator);
    add::<DeletedStateView>(&mut generator);
    add::<Restored>(&mut generator);
    add::<Allocation>(&mut generator);
    add::<Identity>(&mut generator);
    add::<Minted>(&mut generator);
    add::<RunEnded>(&mut generator);
    add::<GoneReport>(&mut generator);
    add::<AppListing>(&mut generator);
    add::<AppView>(&mut generator);
    add::<HeldLockView>(&mut generator);
    add::<ChangeView>(&mut generator);
    add::<FileView>(&mut generator);
    add::<ArchiveView>(&mut generator);
    add::<ArchiveListing>(&mut generator);
    add::<AppForceUnlockResult>(&mut generator);
    add::<TrustPolicies>(&mut generator);
    add::<TrustPolicy>(&mut generator);
    add::<Protections>(&mut generator);
    add::<Protection>(&mut generator);
    add::<Session>(&mut generator);
    add::<ResourceList>(&mut generator);
    add::<ConflictList>(&mut generator);
    add::<Overview>(&mut generator);
    generator.take_definitions(true)
}

/// Puts `T`'s schema (and those it refers to) among the generator's definitions.
fn add<T: JsonSchema>(generator: &mut SchemaGenerator) {
    generator.subschema_for::<T>();
}
