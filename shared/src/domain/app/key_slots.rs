//! Where an app state's key slots are, for key rotation. A file is sealed once, into one blob
//! with one data key, but its key slot is copied into every record that lists the file: each
//! archive that carries it, the app state's newest archive and its open change's uploads. A
//! re-wrap therefore moves each blob's data key once and writes the new slot into every copy.
//! Pure: which blobs need moving, and putting moved slots in place.

use std::collections::BTreeMap;

use super::{AppRecord, ArchiveRecord, FileRef};
use crate::domain::keys::needs_rewrap;
use crate::domain::version::KeySlot;

impl FileRef {
    /// Its blob and the key slot it opens with: two copies equal in these open alike.
    pub fn slot_key(&self) -> (&str, &str, Option<&[u8]>) {
        (&self.blob, &self.key, self.wrapped_key.as_deref())
    }

    /// This file's key slot.
    pub fn slot(&self) -> KeySlot {
        KeySlot {
            key: self.key.clone(),
            wrapped_key: self.wrapped_key.clone(),
        }
    }
}

impl AppRecord {
    /// The files listed in the record itself: its newest archive's and its open change's.
    pub fn listed_files(&self) -> impl Iterator<Item = &FileRef> {
        let newest = self.newest.iter().flat_map(|a| a.files.iter());
        newest.chain(self.lock.iter().flat_map(|l| l.uploads.values()))
    }

    fn listed_files_mut(&mut self) -> impl Iterator<Item = &mut FileRef> {
        let newest = self.newest.iter_mut().flat_map(|a| a.files.iter_mut());
        newest.chain(self.lock.iter_mut().flat_map(|l| l.uploads.values_mut()))
    }

    /// Puts the moved slots in place in the record's own copies; whether any changed.
    pub fn replace_slots(&mut self, moved: &BTreeMap<String, KeySlot>, current: &str) -> bool {
        replace(self.listed_files_mut(), moved, current)
    }
}

impl ArchiveRecord {
    /// Puts the moved slots in place in this archive's copies; whether any changed.
    pub fn replace_slots(&mut self, moved: &BTreeMap<String, KeySlot>, current: &str) -> bool {
        replace(self.files.iter_mut(), moved, current)
    }
}

/// Each blob once, by blob key, with the copy a re-wrap starts from: one behind `current` if
/// any copy is (a run stopped half way moved some copies and not others), else any copy.
pub fn blobs<'a>(
    copies: impl IntoIterator<Item = &'a FileRef>,
    current: &str,
) -> BTreeMap<&'a str, &'a FileRef> {
    let mut blobs: BTreeMap<&str, &FileRef> = BTreeMap::new();
    for file in copies {
        blobs
            .entry(&file.blob)
            .and_modify(|seen| {
                if !needs_rewrap(&seen.key, current) && needs_rewrap(&file.key, current) {
                    *seen = file;
                }
            })
            .or_insert(file);
    }
    blobs
}

/// Whether any of `files` is a copy of a moved blob still behind `current`: a record the
/// moved slots must still be written into.
pub fn holds_behind<'a>(
    files: impl IntoIterator<Item = &'a FileRef>,
    moved: &BTreeMap<String, KeySlot>,
    current: &str,
) -> bool {
    files
        .into_iter()
        .any(|f| moved.contains_key(&f.blob) && needs_rewrap(&f.key, current))
}

/// Gives each copy of a moved blob its new slot, unless the copy is no longer behind
/// `current` (another run moved it first).
fn replace<'a>(
    files: impl Iterator<Item = &'a mut FileRef>,
    moved: &BTreeMap<String, KeySlot>,
    current: &str,
) -> bool {
    let mut changed = false;
    for file in files {
        let Some(slot) = moved.get(&file.blob) else {
            continue;
        };
        if needs_rewrap(&file.key, current) {
            file.key.clone_from(&slot.key);
            file.wrapped_key.clone_from(&slot.wrapped_key);
            changed = true;
        }
    }
    changed
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::app::{AppLock, Ended, FileKind};
    use crate::domain::Actor;

    const OLD: &str = "platform:old";
    const NEW: &str = "platform:new";

    fn file(name: &str, blob: &str, key: &str) -> FileRef {
        FileRef {
            name: name.into(),
            kind: FileKind::Json,
            size: 2,
            sha256: "00".into(),
            lineage: None,
            serial: None,
            uploaded_in: "1-aa".into(),
            uploaded_at: time::OffsetDateTime::UNIX_EPOCH,
            blob: blob.into(),
            seq: 1,
            key: key.into(),
            wrapped_key: Some(key.as_bytes().to_vec()),
        }
    }

    fn archive(files: Vec<FileRef>) -> ArchiveRecord {
        ArchiveRecord {
            commit_id: "1-aa".into(),
            lock_id: "l".into(),
            ended: Ended::Sealed,
            holder: Actor::Cli,
            who: String::new(),
            info: String::new(),
            locked_at: time::OffsetDateTime::UNIX_EPOCH,
            sealed_at: time::OffsetDateTime::UNIX_EPOCH,
            sealed_by: Actor::Cli,
            files,
        }
    }

    fn new_slot() -> KeySlot {
        KeySlot {
            key: NEW.into(),
            wrapped_key: Some(b"rewrapped".to_vec()),
        }
    }

    #[test]
    fn a_blob_carried_by_many_archives_is_one_blob_and_behind_if_any_copy_is() {
        let copies = [
            file("a.json", "b1", NEW),
            file("a.json", "b1", OLD),
            file("b.json", "b2", NEW),
        ];
        let blobs = blobs(&copies, NEW);
        assert_eq!(blobs.len(), 2);
        assert_eq!(blobs["b1"].key, OLD, "the copy a stopped run did not reach");
        assert_eq!(blobs["b2"].key, NEW);
    }

    #[test]
    fn a_moved_slot_replaces_every_copy_that_is_behind_and_nothing_else() {
        let moved = BTreeMap::from([("b1".to_owned(), new_slot())]);
        let mut carried = archive(vec![file("a.json", "b1", OLD), file("b.json", "b2", OLD)]);
        assert!(holds_behind(&carried.files, &moved, NEW));
        assert!(carried.replace_slots(&moved, NEW));
        assert!(
            !holds_behind(&carried.files, &moved, NEW),
            "b2 was not moved"
        );
        assert_eq!(carried.files[0].slot(), new_slot());
        assert_eq!(carried.files[1].key, OLD, "not moved in this run");
        assert!(
            !carried.replace_slots(&moved, NEW),
            "a second pass changes nothing"
        );

        let mut ahead = archive(vec![file("a.json", "b1", NEW)]);
        assert!(
            !ahead.replace_slots(&moved, NEW),
            "already on the key in use"
        );
        assert_eq!(ahead.files[0].wrapped_key.as_deref(), Some(NEW.as_bytes()));
    }

    #[test]
    fn the_record_s_newest_archive_and_open_change_are_copies_too() {
        let mut record = AppRecord::fresh("acme", "net", "inc", time::OffsetDateTime::UNIX_EPOCH);
        record.newest = Some(archive(vec![file("a.json", "b1", OLD)]));
        record.lock = Some(AppLock {
            lock_id: "l".into(),
            commit_id: "2-bb".into(),
            holder: Actor::Cli,
            who: String::new(),
            info: String::new(),
            since: time::OffsetDateTime::UNIX_EPOCH,
            uploads: std::collections::BTreeMap::from([(
                "c.json".to_owned(),
                file("c.json", "b1", OLD),
            )]),
        });
        assert_eq!(record.listed_files().count(), 2);
        let moved = BTreeMap::from([("b1".to_owned(), new_slot())]);
        assert!(record.replace_slots(&moved, NEW));
        assert!(record.listed_files().all(|f| f.slot() == new_slot()));
    }
}
