//! The inventory in DynamoDB: one org's index in its own partition (`INV#<org>`), each
//! state's entry as a few items (`<state>#000`, `<state>#001`, ...) holding its instances as
//! zstd-compressed JSON cut into chunks well under the 400 KB item limit. Chunk 0 heads the
//! entry: its version, whether it was indexed, its instance count and how many chunks it has.
//! A commit writes every chunk of its state's entry in its own `TransactWriteItems` (or,
//! when its content keeps the instances as they were, updates the head's version alone); a
//! shorter entry leaves the chunks past its count behind, and every read ignores them (the
//! head says how many count), so no commit reads the entry it replaces. A removal deletes
//! every chunk the entry may have, so nothing of a deleted state's index is left. Reads
//! Query the org's partition and filter in memory. No entry keeps its resources' tags: a
//! save here sends its whole entry, as patching one would read it back first.
//!
//! A Query answers at most 1 MB a page, so an entry of several chunks may be read over two
//! pages with a commit landing between them. Each replacement marks its head and its chunks
//! with a generation of its own: a read whose chunks are not all of their head's generation
//! (or are missing) saw two commits, and reads again.

use std::collections::BTreeMap;
use std::io::Read;

use async_trait::async_trait;
use aws_sdk_dynamodb::types::{AttributeValue, ConditionCheck, TransactWriteItem, Update};

use super::catalog::DynamoCatalog;
use super::items::*;
use crate::domain::inventory::{Instance, ResourceTag, StateInventory};
use crate::domain::record::StateRecord;
use crate::ports::{
    conflicts_among, IndexedState, InventoryCatalog, InventoryChange, InventoryPatch,
    InventorySummary, ResourceQuery, ResourceRow, StoreError,
};

/// The most compressed bytes a chunk holds: well under the item limit with its keys.
const CHUNK_BYTES: usize = 300 * 1024;
/// The most chunks an entry has: its items, with the rest of a commit, stay within
/// DynamoDB's 100 items and 4 MB a transaction. An entry larger than this (far beyond any
/// state the service accepts, compressed) is kept as not indexed.
pub(super) const MAX_CHUNKS: usize = 8;

const DATA: &str = "d";
const VERSION: &str = "v";
const INDEXED: &str = "ix";
const INSTANCES: &str = "cnt";
const CHUNKS: &str = "ch";
/// The replacement that wrote a head or a chunk: the same on every item of one entry.
const GENERATION: &str = "g";

/// How many times a read starts again after seeing an entry mid-replacement before it
/// takes the entry for damaged.
const TORN_READS: usize = 5;

fn inventory_pk(org: &str) -> String {
    format!("INV#{org}")
}

fn chunk_sk(state: &str, n: usize) -> String {
    format!("{state}#{n:03}")
}

/// The compressed chunks of an entry's instances; `None` when they need more than
/// [`MAX_CHUNKS`].
fn chunks_of(instances: &[Instance]) -> Option<Vec<Vec<u8>>> {
    let json = serde_json::to_vec(instances).expect("instances serialize");
    // Compressing memory into memory cannot fail.
    let packed = zstd::bulk::compress(&json, 3).expect("zstd compresses");
    let chunks: Vec<Vec<u8>> = packed.chunks(CHUNK_BYTES).map(<[u8]>::to_vec).collect();
    (chunks.len() <= MAX_CHUNKS).then_some(chunks)
}

impl DynamoCatalog {
    /// The items that write `inventory` as `state`'s entry.
    pub(super) fn inventory_puts(
        &self,
        org: &str,
        state: &str,
        inventory: &StateInventory,
    ) -> Vec<TransactWriteItem> {
        let (indexed, chunks) = match chunks_of(&inventory.instances) {
            Some(chunks) if inventory.indexed => (true, chunks),
            _ => (false, Vec::new()),
        };
        let count = if indexed {
            inventory.instances.len()
        } else {
            0
        };
        let mut items = Vec::with_capacity(chunks.len().max(1));
        let generation = s(crate::ids::new_id());
        let mut head = key(inventory_pk(org), chunk_sk(state, 0));
        head.insert(GENERATION.into(), generation.clone());
        head.insert(VERSION.into(), n(inventory.version));
        head.insert(INDEXED.into(), AttributeValue::Bool(indexed));
        head.insert(INSTANCES.into(), n(count as u64));
        head.insert(CHUNKS.into(), n(chunks.len() as u64));
        let mut chunks = chunks.into_iter();
        if let Some(first) = chunks.next() {
            head.insert(DATA.into(), AttributeValue::B(first.into()));
        }
        items.push(self.put(head, None));
        for (i, chunk) in chunks.enumerate() {
            let mut item = key(inventory_pk(org), chunk_sk(state, i + 1));
            item.insert(GENERATION.into(), generation.clone());
            item.insert(DATA.into(), AttributeValue::B(chunk.into()));
            items.push(self.put(item, None));
        }
        items
    }

    /// The item that moves an entry to `version`, its chunks untouched: one small update
    /// where a replacement writes every chunk. A missing head is made not indexed, with no
    /// chunks, so the gap shows.
    fn inventory_keep(&self, org: &str, state: &str, version: u64) -> TransactWriteItem {
        let update = Update::builder()
            .table_name(&self.table)
            .set_key(Some(key(inventory_pk(org), chunk_sk(state, 0))))
            .update_expression(
                "SET #v = :v, #ix = if_not_exists(#ix, :no), #cnt = if_not_exists(#cnt, :zero), \
                 #ch = if_not_exists(#ch, :zero)",
            )
            .expression_attribute_names("#v", VERSION)
            .expression_attribute_names("#ix", INDEXED)
            .expression_attribute_names("#cnt", INSTANCES)
            .expression_attribute_names("#ch", CHUNKS)
            .expression_attribute_values(":v", n(version))
            .expression_attribute_values(":no", AttributeValue::Bool(false))
            .expression_attribute_values(":zero", n(0))
            .build()
            .expect("table, key and expression are set");
        TransactWriteItem::builder().update(update).build()
    }

    /// The items of a commit's change to its state's entry.
    pub(super) fn inventory_items(
        &self,
        org: &str,
        state: &str,
        change: &InventoryChange,
    ) -> Vec<TransactWriteItem> {
        match change {
            InventoryChange::Replace(inventory) => self.inventory_puts(org, state, inventory),
            InventoryChange::Keep { version } => vec![self.inventory_keep(org, state, *version)],
            // Entries here hold no tags (`resource_tags`), so a patch has nothing to apply
            // to: the entry is left not indexed, as the port says of a store that cannot
            // take one.
            InventoryChange::Patch(InventoryPatch { version, .. }) => self.inventory_puts(
                org,
                state,
                &StateInventory {
                    version: *version,
                    indexed: false,
                    instances: Vec::new(),
                    tags: None,
                },
            ),
            // Every chunk the entry may have, not its head alone: the chunks of a deleted
            // state would otherwise stay in the partition for good, and be read with it.
            InventoryChange::Remove => (0..MAX_CHUNKS)
                .map(|i| self.delete(key(inventory_pk(org), chunk_sk(state, i))))
                .collect(),
        }
    }

    /// Every entry of the org, by state name, each as one commit left it: read again while
    /// a read sees an entry mid-replacement ([`assemble`]).
    async fn entries(&self, org: &str) -> Result<BTreeMap<String, StateInventory>, StoreError> {
        let mut torn = String::new();
        for _ in 0..TORN_READS {
            let query = self
                .client
                .query()
                .table_name(&self.table)
                .key_condition_expression("pk = :pk")
                .expression_attribute_values(":pk", s(inventory_pk(org)))
                .consistent_read(true);
            match assemble(&self.query_all(query, None).await?)? {
                Ok(entries) => return Ok(entries),
                Err(state) => torn = state,
            }
        }
        // A replacement between the pages of every read is all but impossible: what is
        // left is an entry that lost chunks.
        Err(StoreError::Corrupt(format!(
            "the inventory of state {torn} had chunks missing or of another write in each of \
             {TORN_READS} reads"
        )))
    }
}

/// The entries in the org's items (in sort key order: each state's head, then its chunks);
/// `Err(state)` when a state's chunks are not all of its head's generation, or some are
/// missing: the items were read over two pages with a replacement between them.
fn assemble(
    items: &[Item],
) -> Result<Result<BTreeMap<String, StateInventory>, String>, StoreError> {
    let mut by_state: BTreeMap<String, Vec<&Item>> = BTreeMap::new();
    for item in items {
        let sk = string(item, SK)?;
        let (state, _) = sk
            .rsplit_once('#')
            .ok_or_else(|| StoreError::Corrupt(format!("inventory item {sk:?}")))?;
        by_state.entry(state.to_owned()).or_default().push(item);
    }
    let mut entries = BTreeMap::new();
    for (state, chunks) in by_state {
        let head = chunks[0];
        // Left behind by a removal: no head, nothing of the state counts.
        if string(head, SK)? != chunk_sk(&state, 0) {
            continue;
        }
        let count = usize::try_from(number(head, CHUNKS)?).unwrap_or(usize::MAX);
        let indexed = matches!(head.get(INDEXED), Some(AttributeValue::Bool(true)));
        // Items written before generations were: none on the head nor its chunks, alike.
        let generation = head.get(GENERATION);
        let mut packed = Vec::new();
        for i in 0..count {
            let chunk = chunks.get(i).copied().filter(|c| {
                string(c, SK).is_ok_and(|sk| sk == chunk_sk(&state, i))
                    && c.get(GENERATION) == generation
            });
            let Some(chunk) = chunk else {
                return Ok(Err(state));
            };
            packed.extend(binary(chunk, DATA).unwrap_or_default());
        }
        let instances = if count == 0 {
            Vec::new()
        } else {
            decode(&packed, &state)?
        };
        entries.insert(
            state,
            StateInventory {
                version: number(head, VERSION)?,
                indexed,
                instances,
                tags: None,
            },
        );
    }
    Ok(Ok(entries))
}

fn decode(packed: &[u8], state: &str) -> Result<Vec<Instance>, StoreError> {
    let corrupt = |e: &dyn std::fmt::Display| {
        StoreError::Corrupt(format!("the inventory of state {state}: {e}"))
    };
    let mut json = Vec::new();
    zstd::stream::read::Decoder::new(packed)
        .and_then(|mut d| d.read_to_end(&mut json))
        .map_err(|e| corrupt(&e))?;
    serde_json::from_slice(&json).map_err(|e| corrupt(&e))
}

#[async_trait]
impl InventoryCatalog for DynamoCatalog {
    async fn resources(
        &self,
        org: &str,
        query: &ResourceQuery,
    ) -> Result<Vec<ResourceRow>, StoreError> {
        let entries = self.entries(org).await?;
        Ok(entries
            .iter()
            .flat_map(|(state, inventory)| {
                inventory
                    .instances
                    .iter()
                    .filter(move |i| query.is_after(state, &i.address) && query.matches(state, i))
                    .map(move |i| ResourceRow::of(state, inventory.version, i))
            })
            .take(query.limit)
            .collect())
    }

    async fn conflicts(
        &self,
        org: &str,
        state: Option<&str>,
    ) -> Result<Vec<Vec<ResourceRow>>, StoreError> {
        let entries = self.entries(org).await?;
        Ok(conflicts_among(
            entries.iter().map(|(s, i)| (s.as_str(), i)),
            state,
        ))
    }

    async fn indexed_states(&self, org: &str) -> Result<Vec<IndexedState>, StoreError> {
        Ok(self
            .entries(org)
            .await?
            .iter()
            .map(|(state, inventory)| IndexedState::of(state, inventory))
            .collect())
    }

    async fn inventory_summary(&self, org: &str) -> Result<InventorySummary, StoreError> {
        let entries = self.entries(org).await?;
        Ok(InventorySummary::of(
            entries.iter().map(|(s, i)| (s.as_str(), i)),
        ))
    }

    /// None: an entry here is one compressed whole, which a patch would have to read back
    /// and write again, where a save's commit writes it without reading (a read costs more
    /// on this store than building the entry does).
    async fn resource_tags(
        &self,
        _org: &str,
        _state: &str,
    ) -> Result<Option<Vec<ResourceTag>>, StoreError> {
        Ok(None)
    }

    /// Unread, as the port says of DynamoDB: every commit here carries its entry whole.
    async fn holds_version(
        &self,
        _org: &str,
        _state: &str,
        _version: u64,
    ) -> Result<bool, StoreError> {
        Ok(true)
    }

    async fn put_inventory(
        &self,
        org: &str,
        state: &str,
        revision: u64,
        inventory: &StateInventory,
    ) -> Result<(), StoreError> {
        // The state's item must still be at the revision read, and that record's latest
        // version the one indexed: read once here (a rebuild's write, not a save's), then
        // held by the condition on the revision.
        let record: Option<StateRecord> =
            self.get_record(key(org_pk(org), state_sk(state))).await?;
        let current = record.is_some_and(|r| {
            r.revision == revision
                && r.latest.as_ref().map(|v| v.version) == Some(inventory.version)
        });
        if !current {
            return Err(StoreError::Conflict);
        }
        let check = ConditionCheck::builder()
            .table_name(&self.table)
            .set_key(Some(key(org_pk(org), state_sk(state))))
            .condition_expression(format!("{REV} = :revision"))
            .expression_attribute_values(":revision", n(revision))
            .build()
            .expect("table, key and condition are set");
        let mut items = vec![TransactWriteItem::builder().condition_check(check).build()];
        items.extend(self.inventory_puts(org, state, inventory));
        self.transact(items, None).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::inventory::{Mode, ResourceTag};

    fn instances(n: usize) -> Vec<Instance> {
        (0..n)
            .map(|i| Instance {
                address: format!("aws_s3_bucket.b[{i}]"),
                module: "".into(),
                mode: Mode::Managed,
                resource_type: "aws_s3_bucket".into(),
                provider: "registry.terraform.io/hashicorp/aws".into(),
                digest: Some(format!("{i:064x}")),
                resource: ResourceTag::default(),
            })
            .collect()
    }

    /// The items of an entry of `rows` cut into two chunks, each marked with its
    /// generation (`None`: written before generations were).
    fn entry(rows: &[Instance], head: Option<&str>, tail: Option<&str>) -> Vec<Item> {
        let packed = zstd::bulk::compress(&serde_json::to_vec(rows).unwrap(), 3).unwrap();
        let (first, second) = packed.split_at(packed.len() / 2);
        let mut items = Vec::new();
        for (i, (bytes, generation)) in [(first, head), (second, tail)].into_iter().enumerate() {
            let mut item = key(inventory_pk("acme"), chunk_sk("net", i));
            item.insert(DATA.into(), AttributeValue::B(bytes.to_vec().into()));
            if let Some(g) = generation {
                item.insert(GENERATION.into(), s(g.to_owned()));
            }
            if i == 0 {
                item.insert(VERSION.into(), n(3));
                item.insert(INDEXED.into(), AttributeValue::Bool(true));
                item.insert(INSTANCES.into(), n(rows.len() as u64));
                item.insert(CHUNKS.into(), n(2));
            }
            items.push(item);
        }
        items
    }

    #[test]
    fn an_entry_of_one_generation_reads_whole() {
        let rows = instances(40);
        for generation in [Some("g1"), None] {
            let read = assemble(&entry(&rows, generation, generation))
                .unwrap()
                .unwrap();
            assert_eq!(read["net"].instances, rows);
            assert_eq!(read["net"].version, 3);
        }
    }

    #[test]
    fn chunks_of_another_replacement_or_missing_are_a_torn_read() {
        let rows = instances(40);
        for (head, tail) in [
            (Some("g1"), Some("g2")),
            (Some("g1"), None),
            (None, Some("g2")),
        ] {
            assert_eq!(
                assemble(&entry(&rows, head, tail)).unwrap(),
                Err("net".to_owned()),
                "{head:?} over {tail:?}"
            );
        }
        let mut cut = entry(&rows, Some("g1"), Some("g1"));
        cut.pop();
        assert_eq!(assemble(&cut).unwrap(), Err("net".to_owned()));
    }

    #[test]
    fn a_removal_deletes_every_chunk_an_entry_may_have() {
        let config = aws_sdk_dynamodb::Config::builder()
            .behavior_version(aws_sdk_dynamodb::config::BehaviorVersion::latest())
            .build();
        let catalog = DynamoCatalog::new(aws_sdk_dynamodb::Client::from_conf(config), "t");
        let deleted: Vec<String> = catalog
            .inventory_items("acme", "net", &InventoryChange::Remove)
            .iter()
            .map(|item| {
                let key = item.delete().expect("a delete").key();
                format!("{}/{}", key[PK].as_s().unwrap(), key[SK].as_s().unwrap())
            })
            .collect();
        let every: Vec<String> = (0..MAX_CHUNKS)
            .map(|i| format!("INV#acme/net#{i:03}"))
            .collect();
        assert_eq!(deleted, every);
    }
}
