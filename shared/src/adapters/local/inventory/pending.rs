//! The inventory's changes a commit records rather than writes: one row of
//! `inventory_pending` each, in commit order, holding which of its state's rows go (all of
//! them, or those of the resources it names) and the rows that come, as bytes. A commit
//! writes one such row where writing the rows themselves touches seven b-trees and the
//! trigram index a row (a save that renames 2,000 instances spent 36 ms there); the rows
//! are written later, in order, before anything reads them (see `settle` in the parent).
//!
//! The bytes are our own: the record must carry each instance's resource tag, which the
//! instances' serde form leaves out (it is of no use where entries are stored whole), and a
//! length-prefixed layout is a few lines that encode 2,000 instances in well under a
//! millisecond. Decoding checks every length, so a damaged row is refused as corrupt.

use rusqlite::{params, Connection, OptionalExtension};

use super::super::tables::sql_error;
use crate::domain::inventory::{Instance, Mode, ResourceTag};
use crate::ports::StoreError;

/// One commit's change to its state's rows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Pending {
    /// Every row of the state goes first.
    pub clear: bool,
    /// The resources whose rows go (when not `clear`).
    pub gone: Vec<ResourceTag>,
    /// The rows that come, in address order.
    pub instances: Vec<Instance>,
}

/// A recorded change, with the state it is of.
pub(super) struct Recorded {
    pub seq: i64,
    pub org: String,
    pub state: String,
    pub pending: Pending,
}

/// Records a change after the state's earlier ones: its rows all go first (`clear`) or
/// those of the resources `gone`, and `instances` come. A change that clears the state's
/// rows makes the earlier ones moot, so they are dropped unwritten. Its size, by which the
/// waiting work is bounded, counts the rows it names (a cleared state's count as none:
/// their number is not known until they go).
pub(super) fn record(
    conn: &Connection,
    org: &str,
    state: &str,
    clear: bool,
    gone: &[ResourceTag],
    instances: &[&Instance],
) -> Result<(), StoreError> {
    if clear {
        forget(conn, org, state)?;
    }
    conn.prepare_cached(
        "INSERT INTO inventory_pending (org, state, clear, gone, instances, size)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )
    .and_then(|mut s| {
        s.execute(params![
            org,
            state,
            clear,
            tags_bytes(gone),
            instances_bytes(instances),
            (gone.len() + instances.len()) as i64,
        ])
    })
    .map(drop)
    .map_err(sql_error)
}

/// Drops the state's recorded changes (its rows are going whole).
fn forget(conn: &Connection, org: &str, state: &str) -> Result<(), StoreError> {
    conn.prepare_cached("DELETE FROM inventory_pending WHERE org = ?1 AND state = ?2")
        .and_then(|mut s| s.execute(params![org, state]))
        .map(drop)
        .map_err(sql_error)
}

/// Whether any change is recorded and not yet written. A catalog older than the table (one
/// a full disk kept from being brought up to date) has none.
pub(super) fn any(conn: &Connection) -> Result<bool, StoreError> {
    let table: bool = conn
        .prepare_cached(
            "SELECT EXISTS (SELECT 1 FROM sqlite_schema WHERE name = 'inventory_pending')",
        )
        .and_then(|mut s| s.query_row([], |row| row.get(0)))
        .map_err(sql_error)?;
    if !table {
        return Ok(false);
    }
    conn.prepare_cached("SELECT EXISTS (SELECT 1 FROM inventory_pending)")
        .and_then(|mut s| s.query_row([], |row| row.get(0)))
        .map_err(sql_error)
}

/// The rows the recorded changes write or remove, all told.
pub(super) fn size(conn: &Connection) -> Result<u64, StoreError> {
    let size: i64 = conn
        .prepare_cached("SELECT coalesce(sum(size), 0) FROM inventory_pending")
        .and_then(|mut s| s.query_row([], |row| row.get(0)))
        .map_err(sql_error)?;
    Ok(size.max(0) as u64)
}

/// A row of `inventory_pending` as stored: seq, org, state, clear, gone and instances.
type Row = (i64, String, String, bool, Vec<u8>, Vec<u8>);

/// The oldest recorded change, if any.
pub(super) fn oldest(conn: &Connection) -> Result<Option<Recorded>, StoreError> {
    let row: Option<Row> = conn
        .prepare_cached(
            "SELECT seq, org, state, clear, gone, instances FROM inventory_pending
             ORDER BY seq LIMIT 1",
        )
        .and_then(|mut s| {
            s.query_row([], |row| {
                Ok((
                    row.get(0)?,
                    row.get(1)?,
                    row.get(2)?,
                    row.get(3)?,
                    row.get(4)?,
                    row.get(5)?,
                ))
            })
            .optional()
        })
        .map_err(sql_error)?;
    row.map(|(seq, org, state, clear, gone, instances)| {
        let pending = Pending {
            clear,
            gone: tags_of(&gone).ok_or_else(|| corrupt(&org, &state))?,
            instances: instances_of(&instances).ok_or_else(|| corrupt(&org, &state))?,
        };
        Ok(Recorded {
            seq,
            org,
            state,
            pending,
        })
    })
    .transpose()
}

/// Removes a change once written.
pub(super) fn done(conn: &Connection, seq: i64) -> Result<(), StoreError> {
    conn.prepare_cached("DELETE FROM inventory_pending WHERE seq = ?1")
        .and_then(|mut s| s.execute(params![seq]))
        .map(drop)
        .map_err(sql_error)
}

fn corrupt(org: &str, state: &str) -> StoreError {
    StoreError::Corrupt(format!(
        "catalog: a recorded inventory change of state {state} (org {org}) is damaged"
    ))
}

/// Tags as 8 bytes each, little-endian (as an entry's `tags` column holds them).
pub(super) fn tags_bytes(tags: &[ResourceTag]) -> Vec<u8> {
    tags.iter().flat_map(|t| t.0.to_le_bytes()).collect()
}

/// The tags of [`tags_bytes`]; `None` unless a whole number of them.
pub(super) fn tags_of(bytes: &[u8]) -> Option<Vec<ResourceTag>> {
    if !bytes.len().is_multiple_of(8) {
        return None;
    }
    Some(
        bytes
            .chunks_exact(8)
            .map(|b| ResourceTag(u64::from_le_bytes(b.try_into().expect("8 bytes"))))
            .collect(),
    )
}

/// Each instance as its tag (8 bytes), its mode (1), then its address, module, type,
/// provider and digest, each a 4-byte length and its bytes (the digest's length
/// `u32::MAX` when it has none).
fn instances_bytes(instances: &[&Instance]) -> Vec<u8> {
    let room: usize = instances
        .iter()
        .map(|i| {
            29 + i.address.len()
                + i.module.len()
                + i.resource_type.len()
                + i.provider.len()
                + i.digest.as_ref().map_or(0, String::len)
        })
        .sum();
    let mut out = Vec::with_capacity(room);
    let text = |out: &mut Vec<u8>, s: &str| {
        out.extend_from_slice(&(s.len() as u32).to_le_bytes());
        out.extend_from_slice(s.as_bytes());
    };
    for &i in instances {
        out.extend_from_slice(&i.resource.0.to_le_bytes());
        out.push(match i.mode {
            Mode::Managed => 0,
            Mode::Data => 1,
        });
        text(&mut out, &i.address);
        text(&mut out, &i.module);
        text(&mut out, &i.resource_type);
        text(&mut out, &i.provider);
        match &i.digest {
            Some(d) => text(&mut out, d),
            None => out.extend_from_slice(&u32::MAX.to_le_bytes()),
        }
    }
    out
}

/// The instances of [`instances_bytes`]; `None` where the bytes are not such a list.
fn instances_of(bytes: &[u8]) -> Option<Vec<Instance>> {
    let mut reader = Reader(bytes);
    let mut instances = Vec::new();
    while !reader.0.is_empty() {
        let resource = ResourceTag(u64::from_le_bytes(reader.take(8)?.try_into().ok()?));
        let mode = match reader.take(1)?[0] {
            0 => Mode::Managed,
            1 => Mode::Data,
            _ => return None,
        };
        instances.push(Instance {
            address: reader.text()?,
            module: reader.text()?,
            mode,
            resource_type: reader.text()?,
            provider: reader.text()?,
            digest: reader.maybe_text()?,
            resource,
        });
    }
    Some(instances)
}

/// What is left of the bytes being decoded.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Some(head)
    }

    fn length(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }

    fn text(&mut self) -> Option<String> {
        let n = self.length()?;
        self.string(n)
    }

    /// A text, or `None` inside when its length is `u32::MAX`.
    fn maybe_text(&mut self) -> Option<Option<String>> {
        match self.length()? {
            u32::MAX => Some(None),
            n => self.string(n).map(Some),
        }
    }

    fn string(&mut self, n: u32) -> Option<String> {
        let bytes = self.take(usize::try_from(n).ok()?)?;
        String::from_utf8(bytes.to_vec()).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn instance(address: &str, digest: Option<&str>, mode: Mode) -> Instance {
        Instance {
            address: address.into(),
            module: "module.net[\"é\"]".into(),
            mode,
            resource_type: "aws_vpc".into(),
            provider: "registry.terraform.io/hashicorp/aws".into(),
            digest: digest.map(str::to_owned),
            resource: ResourceTag(u64::MAX - 7),
        }
    }

    #[test]
    fn instances_come_back_as_they_went_in() {
        let instances = vec![
            instance("module.net[\"é\"].aws_vpc.a", Some("ab12"), Mode::Managed),
            instance("data.aws_vpc.b", None, Mode::Data),
            instance("aws_vpc.c", Some(""), Mode::Managed),
        ];
        let refs: Vec<&Instance> = instances.iter().collect();
        assert_eq!(instances_of(&instances_bytes(&refs)), Some(instances));
        assert_eq!(instances_of(&[]), Some(Vec::new()));
        let tags = vec![ResourceTag(1), ResourceTag(u64::MAX)];
        assert_eq!(tags_of(&tags_bytes(&tags)), Some(tags));
    }

    #[test]
    fn damaged_bytes_are_refused_not_misread() {
        let bytes = instances_bytes(&[&instance("aws_vpc.a", Some("ab"), Mode::Managed)]);
        for cut in 1..bytes.len() {
            assert_eq!(instances_of(&bytes[..cut]), None, "cut at {cut}");
        }
        let mut bad_mode = bytes.clone();
        bad_mode[8] = 2;
        assert_eq!(instances_of(&bad_mode), None);
        let mut too_long = bytes.clone();
        too_long[9..13].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(instances_of(&too_long), None);
        let mut not_utf8 = bytes;
        not_utf8[13] = 0xff;
        assert_eq!(instances_of(&not_utf8), None);
        assert_eq!(tags_of(&[0; 9]), None);
    }
}
