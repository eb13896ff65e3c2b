//! The unit tests of `opening`, beside it so that the file holds its code alone.

use super::*;
use crate::crypto::envelope::{read_header, seal, SEGMENT_SIZE};

const KEY: [u8; 32] = [7u8; 32];

fn binding(version: u64) -> Binding<'static> {
    Binding {
        org: "acme",
        incarnation: "inc",
        version,
        blob_id: "b1",
    }
}

fn opening(object: &[u8], key: &[u8; 32], version: u64) -> Result<Opening, EnvelopeError> {
    let header = read_header(object)?;
    Opening::new(object.to_vec(), &header, key, &binding(version))
}

fn roundtrip(plaintext: &[u8]) -> Vec<u8> {
    let sealed = seal(plaintext, &KEY, &binding(1));
    let header = read_header(&sealed).unwrap();
    assert_eq!(
        (header.compression, header.key.is_none()),
        (Compression::Gzip, true)
    );
    open_into(
        opening(&sealed, &KEY, 1).unwrap(),
        plaintext.len(),
        Vec::new(),
    )
    .unwrap()
}

fn pseudo_random(n: usize) -> Vec<u8> {
    let mut x = 0x2545F4914F6CDD1Du64;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

fn gunzip(member: &[u8]) -> Vec<u8> {
    use std::io::Read;
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(member)
        .read_to_end(&mut out)
        .unwrap();
    out
}

#[test]
fn roundtrips_empty_small_and_multi_segment_content() {
    assert_eq!(roundtrip(b""), b"");
    assert_eq!(roundtrip(b"{\"version\":4}"), b"{\"version\":4}");
    // Incompressible data spans many segments, including an exact multiple, and a large
    // one is deflated on several threads.
    for n in [SEGMENT_SIZE * 3, SEGMENT_SIZE * 3 + 17, 3_000_000] {
        let data = pseudo_random(n);
        assert_eq!(roundtrip(&data), data);
    }
}

/// What a gzip read sends: the opened segments, one by one or gathered in place, are
/// one gzip member of the plaintext, as long as `opened_len` said.
#[test]
fn the_opened_segments_are_the_gzip_member_of_the_plaintext() {
    let data = pseudo_random(SEGMENT_SIZE * 5 + 99);
    let sealed = seal(&data, &KEY, &binding(1));
    let mut streamed = Vec::new();
    let mut o = opening(&sealed, &KEY, 1).unwrap();
    let declared = o.opened_len();
    while let Some(segment) = o.next_segment().unwrap() {
        streamed.extend_from_slice(segment);
    }
    assert_eq!(streamed.len() as u64, declared);
    assert_eq!(gunzip(&streamed), data);
    let gathered = opening(&sealed, &KEY, 1).unwrap().into_opened().unwrap();
    assert_eq!(gathered, streamed);
    let mut inflating = Inflating::new(opening(&sealed, &KEY, 1).unwrap()).unwrap();
    let mut plain = Vec::new();
    while let Some(chunk) = inflating.next_chunk().unwrap() {
        plain.extend_from_slice(&chunk);
    }
    assert_eq!(plain, data);
}

fn reading(sealed: &[u8], head: usize) -> Opening {
    let header = read_header(sealed).unwrap();
    let rest = std::io::Cursor::new(sealed[head..].to_vec());
    Opening::reading(
        sealed[..head].to_vec(),
        Box::new(rest),
        sealed.len() as u64,
        &header,
        &KEY,
        &binding(1),
    )
    .unwrap()
}

/// An object read as it is opened, whatever part of it came with its header, opens to
/// the same segments as the object in memory does, gathered or one by one.
#[test]
fn an_object_read_as_it_is_opened_opens_as_the_object_in_memory() {
    let data = pseudo_random(SEGMENT_SIZE * 3 + 1234);
    let sealed = seal(&data, &KEY, &binding(1));
    let whole = opening(&sealed, &KEY, 1).unwrap().into_opened().unwrap();
    for head in [17, 100, SEGMENT_SIZE + 40, sealed.len() - 1] {
        let mut o = reading(&sealed, head);
        assert_eq!(o.opened_len(), whole.len() as u64);
        let mut streamed = Vec::new();
        while let Some(segment) = o.next_segment().unwrap() {
            streamed.extend_from_slice(segment);
        }
        assert!(streamed == whole, "head {head}: segments differ");
        assert!(reading(&sealed, head).into_opened().unwrap() == whole);
    }
    let plain = open_into(reading(&sealed, 17), data.len(), Vec::new()).unwrap();
    assert!(plain == data);
}

/// A reader that fails after some bytes, as a disk can.
struct FailsAfter(std::io::Cursor<Vec<u8>>, u64);

impl Read for FailsAfter {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.0.position() >= self.1 {
            return Err(std::io::Error::other("input/output error"));
        }
        let room = (self.1 - self.0.position()).min(buf.len() as u64) as usize;
        self.0.read(&mut buf[..room])
    }
}

#[test]
fn a_read_that_fails_part_way_ends_the_opening_as_unreadable() {
    let data = pseudo_random(SEGMENT_SIZE * 3);
    let sealed = seal(&data, &KEY, &binding(1));
    let header = read_header(&sealed).unwrap();
    let rest = FailsAfter(std::io::Cursor::new(sealed[17..].to_vec()), 70_000);
    let mut o = Opening::reading(
        sealed[..17].to_vec(),
        Box::new(rest),
        sealed.len() as u64,
        &header,
        &KEY,
        &binding(1),
    )
    .unwrap();
    assert!(o.next_segment().unwrap().is_some());
    assert!(matches!(
        o.next_segment(),
        Err(EnvelopeError::Unreadable(_))
    ));
    assert!(
        o.next_segment().unwrap().is_none(),
        "nothing after the failure"
    );
    // Damage further on is found as it is read, as it is in memory.
    let mut flipped = sealed.clone();
    let last = flipped.len() - 1;
    flipped[last] ^= 1;
    assert!(matches!(
        reading(&flipped, 17).into_opened(),
        Err(EnvelopeError::Damaged)
    ));
}

/// Sealed into a writer a segment at a time, the object opens as one sealed in memory;
/// a writer that fails is told, with nothing more written after it.
#[test]
fn an_object_sealed_into_a_writer_opens_and_a_failing_writer_is_told() {
    use crate::crypto::envelope::seal_into;
    let data = pseudo_random(3_000_000);
    let mut written = Vec::new();
    seal_into(&data, &KEY, &binding(1), &mut written).unwrap();
    let plain = open_into(opening(&written, &KEY, 1).unwrap(), data.len(), Vec::new());
    assert!(plain.unwrap() == data);

    struct Full(usize);
    impl Write for Full {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            if self.0 + buf.len() > 200_000 {
                return Err(std::io::Error::other("no space left on device"));
            }
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut full = Full(0);
    let failed = seal_into(&data, &KEY, &binding(1), &mut full);
    assert!(failed.is_err_and(|e| e.to_string().contains("no space")));
    assert!(full.0 <= 200_000);
}

#[test]
fn opening_into_a_used_buffer_gives_only_the_new_plaintext() {
    let sealed = seal(b"small", &KEY, &binding(1));
    let used = pseudo_random(200_000);
    let reused = open_into(opening(&sealed, &KEY, 1).unwrap(), 5, used).unwrap();
    assert_eq!(reused, b"small");
}

#[test]
fn plaintext_never_appears_in_the_object() {
    let secret = b"{\"outputs\":{\"password\":\"hunter2-very-secret\"}}";
    let sealed = seal(secret, &KEY, &binding(1));
    assert!(!sealed.windows(10).any(|w| w == b"hunter2-ve"));
}

#[test]
fn another_binding_or_key_does_not_open_and_says_so_before_any_byte() {
    let sealed = seal(b"state", &KEY, &binding(1));
    assert!(matches!(
        opening(&sealed, &KEY, 2),
        Err(EnvelopeError::Damaged)
    ));
    assert!(matches!(
        opening(&sealed, &[8u8; 32], 1),
        Err(EnvelopeError::Damaged)
    ));
}

fn drain(mut o: Opening) -> Result<(), EnvelopeError> {
    while o.next_segment()?.is_some() {}
    Ok(())
}

#[test]
fn truncation_tampering_and_header_edits_are_caught() {
    let data = pseudo_random(SEGMENT_SIZE * 2 + 5);
    let sealed = seal(&data, &KEY, &binding(1));
    let header_len = 17;
    // Cut at a segment boundary: the new last segment was not sealed as last.
    let cut = &sealed[..header_len + SEGMENT_SIZE + TAG_SIZE];
    assert!(matches!(opening(cut, &KEY, 1), Err(EnvelopeError::Damaged)));
    let cut = &sealed[..header_len + 2 * (SEGMENT_SIZE + TAG_SIZE)];
    assert!(matches!(
        drain(opening(cut, &KEY, 1).unwrap()),
        Err(EnvelopeError::Damaged)
    ));
    let mut flipped = sealed.clone();
    let last = flipped.len() - 1;
    flipped[last] ^= 1;
    let o = opening(&flipped, &KEY, 1).unwrap();
    assert!(matches!(o.into_opened(), Err(EnvelopeError::Damaged)));
    // Swapped segments: each is authenticated at its own position.
    let mut swapped = sealed.clone();
    let (a, b) = (header_len, header_len + SEGMENT_SIZE + TAG_SIZE);
    let first = swapped[a..b].to_vec();
    swapped.copy_within(b..b + (b - a), a);
    swapped[b..b + first.len()].copy_from_slice(&first);
    assert!(matches!(
        opening(&swapped, &KEY, 1),
        Err(EnvelopeError::Damaged)
    ));
    let mut edited = sealed.clone();
    edited[8] ^= 1; // inside the segment size
    let h = read_header(&edited).unwrap();
    assert!(matches!(
        Opening::new(edited.clone(), &h, &KEY, &binding(1)),
        Err(EnvelopeError::Damaged)
    ));
}

#[test]
fn a_foreign_or_future_object_is_named_as_such() {
    assert!(matches!(
        read_header(b"PK\x03\x04..."),
        Err(EnvelopeError::NotAnEnvelope)
    ));
    let mut sealed = seal(b"x", &KEY, &binding(1));
    sealed[4] = 9;
    assert!(matches!(
        read_header(&sealed),
        Err(EnvelopeError::UnsupportedFormat(9))
    ));
    // Format 2 with format 1's compression is no format this code wrote.
    sealed[4] = 2;
    sealed[5] = 1;
    assert!(matches!(
        read_header(&sealed),
        Err(EnvelopeError::UnsupportedFormat(2))
    ));
    assert!(matches!(
        read_header(b"HGST\x02\x02\x00"),
        Err(EnvelopeError::TruncatedHeader)
    ));
    assert!(matches!(
        read_header(b"HGST\x01\x01\x00"),
        Err(EnvelopeError::TruncatedHeader)
    ));
}

/// A version sealed in format 1 by the server before format 2 (tests/fixtures/format-1):
/// its header still names the key, the platform key still unwraps it, and it opens to
/// the plaintext the catalog recorded; moved to another version, it does not.
#[tokio::test]
async fn a_format_1_object_written_before_format_2_still_opens() {
    use crate::crypto::PlatformKey;
    use crate::ports::{KeyContext, KeyOpener};
    use sha2::{Digest, Sha256};
    let object = include_bytes!("../../../../tests/fixtures/format-1/data/blobs/orgs+default+states+eb27bf4dbc9a4d0ba7013e040d79ec41+1-3d76b21a88bcc4d5286f627acbf12728");
    let key =
        PlatformKey::from_base64(include_str!("../../../../tests/fixtures/format-1/data.key"))
            .unwrap();
    let header = read_header(object).unwrap();
    assert_eq!(header.compression, Compression::Zstd);
    let named = header.key.clone().unwrap();
    assert_eq!(named.key_id, key.key_id());
    let context = KeyContext {
        org: "default",
        state: "net",
    };
    let data_key = key
        .unwrap_key(&named.key_id, &named.wrapped, &context)
        .await
        .unwrap();
    let blob =
        "orgs/default/states/eb27bf4dbc9a4d0ba7013e040d79ec41/1-3d76b21a88bcc4d5286f627acbf12728";
    let at = |version| Binding {
        org: "default",
        incarnation: "eb27bf4dbc9a4d0ba7013e040d79ec41",
        version,
        blob_id: blob,
    };
    let o = Opening::new(object.to_vec(), &header, &data_key, &at(1)).unwrap();
    let plain = open_into(o, 0, Vec::new()).unwrap();
    let digest: String = Sha256::digest(&plain)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_eq!(
        digest,
        "b15a5c032f8fcabe580e4629c17a7042166501621f650c9c3ae4ac1ac64fe19a"
    );
    assert!(matches!(
        Opening::new(object.to_vec(), &header, &data_key, &at(2)),
        Err(EnvelopeError::Damaged)
    ));
    assert!(
        Inflating::new(Opening::new(object.to_vec(), &header, &data_key, &at(1)).unwrap()).is_err()
    );
}
