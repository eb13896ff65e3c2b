//! The blob port's cases of the contract (included by ../contract.rs): objects put, read
//! whole or as they are sent, written as they are made, and deleted.

use super::*;
use hegemony_state::ports::OpenedBlob;

pub async fn blobs_put_get_delete(f: Fixture) {
    let key = "orgs/acme.x/states/inc/1-abc";
    assert!(f.blobs.get(key).await.unwrap().is_none());
    f.blobs.put(key, b"sealed".to_vec()).await.unwrap();
    assert_eq!(
        f.blobs.get(key).await.unwrap().as_deref(),
        Some(&b"sealed"[..])
    );
    f.blobs.delete(key).await.unwrap();
    assert!(f.blobs.get(key).await.unwrap().is_none());
    f.blobs.delete(key).await.unwrap();
}

/// An opened blob reads as the blob it is, whole or with its head at hand and the rest
/// read after it, whether it is shorter than the head asked for, as long or longer.
pub async fn an_opened_blob_reads_as_stored(f: Fixture) {
    let key = "orgs/acme.x/states/inc/2-def";
    assert!(f.blobs.open(key, 16).await.unwrap().is_none());
    let stored: Vec<u8> = (0..100_000u32).map(|i| (i * 7919 % 251) as u8).collect();
    f.blobs.put(key, stored.clone()).await.unwrap();
    for head in [0, 16, 99_999, 100_000, 200_000] {
        let read = match f.blobs.open(key, head).await.unwrap().unwrap() {
            OpenedBlob::Whole(bytes) => bytes,
            OpenedBlob::Reading {
                mut head,
                mut rest,
                len,
            } => {
                assert_eq!(len, stored.len() as u64);
                std::io::Read::read_to_end(&mut rest, &mut head).unwrap();
                head
            }
        };
        assert!(read == stored, "head {head}: the bytes read differ");
    }
}

/// An object written as it is made is stored as a put stores it; one whose writing fails
/// part way stores nothing and leaves nothing behind.
pub async fn an_object_written_as_it_is_made_is_stored_whole_or_not_at_all(f: Fixture) {
    let key = "orgs/acme.x/states/inc/3-ghi";
    let bytes: Vec<u8> = (0..200_000u32).map(|i| (i * 31 % 253) as u8).collect();
    let parts = bytes.clone();
    let write = Box::new(move |out: &mut dyn std::io::Write| {
        parts
            .chunks(65_552)
            .try_for_each(|part| out.write_all(part))
    });
    f.blobs.put_written(key, write).await.unwrap();
    assert!(f.blobs.get(key).await.unwrap() == Some(bytes));
    let torn = "orgs/acme.x/states/inc/4-jkl";
    let write = Box::new(|out: &mut dyn std::io::Write| {
        out.write_all(&[1; 70_000])?;
        Err(std::io::Error::other("no space left on device"))
    });
    let failed = f.blobs.put_written(torn, write).await;
    assert!(
        matches!(failed, Err(StoreError::Unavailable(_))),
        "{failed:?}"
    );
    assert!(f.blobs.get(torn).await.unwrap().is_none());
    let long_after = NOW + time::Duration::days(365 * 100);
    assert_eq!(f.blobs.remove_leftovers(long_after).await.unwrap(), 0);
}
