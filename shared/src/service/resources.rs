//! Searching an org's resource instances across its states, and finding the objects two of
//! its states manage: answered from the inventory (`ports::InventoryCatalog`), which holds
//! addresses, types, providers and keyed digests. Never a value, and never a digest either:
//! a digest only groups instances here.

use schemars::JsonSchema;
use serde::Serialize;

use super::{App, Error};
use crate::domain::inventory::Mode;
use crate::domain::Principal;
use crate::ports::{ResourceQuery, ResourceRow};

/// The most instances one page of a search holds.
pub const MAX_PAGE: usize = 1000;

/// One resource instance found, with the state and version it is in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
#[schemars(rename = "Resource")]
pub struct ResourceView {
    pub state: String,
    /// The state's version the instance was indexed from: its latest.
    pub version: u64,
    /// The instance's address, as Terraform prints it.
    pub address: String,
    /// The module path, empty for the root module.
    pub module: String,
    pub mode: Mode,
    #[serde(rename = "type")]
    pub resource_type: String,
    /// The provider's source address (`registry.terraform.io/hashicorp/aws`).
    pub provider: String,
}

impl From<ResourceRow> for ResourceView {
    fn from(row: ResourceRow) -> Self {
        Self {
            state: row.state,
            version: row.version,
            address: row.address,
            module: row.module,
            mode: row.mode,
            resource_type: row.resource_type,
            provider: row.provider,
        }
    }
}

/// One page of a search, in (state, address) order.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[schemars(rename = "ResourceList")]
pub struct ResourcePage {
    pub resources: Vec<ResourceView>,
    /// The (state, address) after which the next page starts; `None` on the last page (one
    /// that holds the last match, even when full). The http layer makes it an opaque cursor.
    #[serde(skip)]
    pub next: Option<(String, String)>,
}

/// One object managed by two or more states: the instances whose identities are equal.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[schemars(rename = "Conflict")]
pub struct Conflict {
    /// The type the instances share (equal identities are of one type).
    #[serde(rename = "type")]
    pub resource_type: String,
    /// In (state, address) order; at least two states among them.
    pub instances: Vec<ResourceView>,
}

/// The org's instances matching `query`, one page of them.
///
/// # Errors
/// Storage faults alone: the index answers from itself, with no version opened and no key
/// service asked. Any principal of the org may search (a workload session or a step token
/// never reaches this: the http layer keeps them to their own states).
pub async fn search(
    app: &App,
    principal: &Principal,
    query: ResourceQuery,
) -> Result<ResourcePage, Error> {
    let limit = query.limit.clamp(1, MAX_PAGE);
    // One row past the page says whether another page follows: a page that ends exactly at
    // the last match gives no cursor, so no reader asks for an empty page or says that more
    // match when none do.
    let query = ResourceQuery {
        limit: limit + 1,
        ..query
    };
    let mut rows = app.catalog.resources(&principal.org, &query).await?;
    let more = rows.len() > limit;
    rows.truncate(limit);
    let next = more
        .then(|| rows.last().map(|r| (r.state.clone(), r.address.clone())))
        .flatten();
    Ok(ResourcePage {
        resources: rows.into_iter().map(ResourceView::from).collect(),
        next,
    })
}

/// The objects two or more of the org's states manage; with `state`, only those it is one
/// of (what its page warns of).
///
/// # Errors
/// As [`search`].
pub async fn conflicts(
    app: &App,
    principal: &Principal,
    state: Option<&str>,
) -> Result<Vec<Conflict>, Error> {
    let groups = app.catalog.conflicts(&principal.org, state).await?;
    Ok(groups.into_iter().filter_map(conflict_of).collect())
}

/// A group as the catalog gives it, `None` for one that is not a conflict (a catalog's
/// group always is; an empty one would be a catalog's fault, and shows as nothing).
fn conflict_of(rows: Vec<ResourceRow>) -> Option<Conflict> {
    let resource_type = rows.first()?.resource_type.clone();
    Some(Conflict {
        resource_type,
        instances: rows.into_iter().map(ResourceView::from).collect(),
    })
}
