//! The sealed object: a self-describing header (magic, format, the wrapping key's id, the
//! wrapped data key, segment parameters), then the compressed plaintext in AES-256-GCM STREAM
//! segments. Every segment's associated data binds the header and the object's place (org,
//! state incarnation, version, blob id), so an object copied elsewhere, truncated, reordered
//! or with an edited header does not open.

use std::io::Write;

use aes_gcm::aead::rand_core::RngCore;
use aes_gcm::aead::stream::{DecryptorBE32, EncryptorBE32};
use aes_gcm::aead::{KeyInit, OsRng};
use aes_gcm::Aes256Gcm;

/// The first bytes of every sealed object.
pub const MAGIC: &[u8; 4] = b"HGST";
/// The format this code writes and reads.
pub const FORMAT_VERSION: u8 = 1;
const COMPRESSION_ZSTD: u8 = 1;
/// Plaintext bytes (compressed state) per segment.
pub const SEGMENT_SIZE: usize = 64 * 1024;
const TAG_SIZE: usize = 16;
/// STREAM with a 32-bit counter and a last-segment flag leaves 7 of GCM's 12 nonce bytes.
const NONCE_PREFIX_SIZE: usize = 7;
/// zstd level 1: the fastest level still gives JSON states a 5-10x ratio, and the save path
/// is CPU-bound on compression.
const ZSTD_LEVEL: i32 = 1;

/// Where a sealed object belongs; bound into every segment's associated data.
#[derive(Debug, Clone, Copy)]
pub struct Binding<'a> {
    pub org: &'a str,
    pub incarnation: &'a str,
    pub version: u64,
    pub blob_id: &'a str,
}

impl Binding<'_> {
    fn append_to(&self, aad: &mut Vec<u8>) {
        for part in [self.org, self.incarnation] {
            aad.extend_from_slice(&(part.len() as u32).to_be_bytes());
            aad.extend_from_slice(part.as_bytes());
        }
        aad.extend_from_slice(&self.version.to_be_bytes());
        aad.extend_from_slice(&(self.blob_id.len() as u32).to_be_bytes());
        aad.extend_from_slice(self.blob_id.as_bytes());
    }
}

/// Why an object does not open.
#[derive(Debug, thiserror::Error)]
pub enum EnvelopeError {
    #[error("not a sealed state object (bad magic)")]
    NotAnEnvelope,
    #[error("sealed with format {0}, which this version does not read")]
    UnsupportedFormat(u8),
    #[error("the object's header is truncated")]
    TruncatedHeader,
    #[error("the object is damaged, truncated, or belongs elsewhere (authentication failed)")]
    Damaged,
    #[error("the decrypted content does not decompress: {0}")]
    Decompress(String),
}

/// The header of a sealed object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    /// What wrapped the data key: `platform:<fingerprint>` or `kms:<key arn>`.
    pub key_id: String,
    pub wrapped_key: Vec<u8>,
    segment_size: usize,
    nonce_prefix: [u8; NONCE_PREFIX_SIZE],
    /// Length of the header in bytes: where the segments start.
    len: usize,
}

/// Seals `plaintext` under `data_key` for `binding`.
///
/// Output grows with the compressed size only: the plaintext is read once, compressed into
/// segment-sized pieces and each piece encrypted in place.
pub fn seal(
    plaintext: &[u8],
    data_key: &[u8; 32],
    key_id: &str,
    wrapped_key: &[u8],
    binding: &Binding<'_>,
) -> Vec<u8> {
    let mut nonce_prefix = [0u8; NONCE_PREFIX_SIZE];
    OsRng.fill_bytes(&mut nonce_prefix);
    let mut out = Vec::with_capacity(plaintext.len() / 6 + 256);
    write_header(&mut out, key_id, wrapped_key, SEGMENT_SIZE, &nonce_prefix);
    let aad = associated_data(&out, binding);
    let cipher = Aes256Gcm::new(data_key.into());
    let sealer = Sealer {
        encryptor: EncryptorBE32::from_aead(cipher, (&nonce_prefix).into()),
        aad,
        pending: Vec::with_capacity(SEGMENT_SIZE + TAG_SIZE),
        out,
    };
    // Writing to memory cannot fail, and the only encryption error is a STREAM counter
    // overflow (2^32 segments of 64 KiB = 256 TiB), far beyond any state.
    let mut encoder =
        zstd::stream::write::Encoder::new(sealer, ZSTD_LEVEL).expect("zstd encoder starts");
    encoder.write_all(plaintext).expect("sealing to memory");
    encoder.finish().expect("zstd finishes").finish()
}

/// Compressed bytes in, encrypted segments out: a segment is sealed only once more data
/// follows it, so the last one always goes through `encrypt_last`.
struct Sealer {
    encryptor: EncryptorBE32<Aes256Gcm>,
    aad: Vec<u8>,
    pending: Vec<u8>,
    out: Vec<u8>,
}

impl Sealer {
    fn finish(mut self) -> Vec<u8> {
        self.encryptor
            .encrypt_last_in_place(&self.aad, &mut self.pending)
            .expect("last segment seals");
        self.out.extend_from_slice(&self.pending);
        self.out
    }
}

impl Write for Sealer {
    fn write(&mut self, mut buf: &[u8]) -> std::io::Result<usize> {
        let n = buf.len();
        while !buf.is_empty() {
            if self.pending.len() == SEGMENT_SIZE {
                self.encryptor
                    .encrypt_next_in_place(&self.aad, &mut self.pending)
                    .map_err(|_| std::io::Error::other("STREAM counter overflow"))?;
                self.out.extend_from_slice(&self.pending);
                self.pending.clear();
            }
            let take = (SEGMENT_SIZE - self.pending.len()).min(buf.len());
            self.pending.extend_from_slice(&buf[..take]);
            buf = &buf[take..];
        }
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn write_header(
    out: &mut Vec<u8>,
    key_id: &str,
    wrapped_key: &[u8],
    segment_size: usize,
    nonce_prefix: &[u8; NONCE_PREFIX_SIZE],
) {
    out.extend_from_slice(MAGIC);
    out.push(FORMAT_VERSION);
    out.push(COMPRESSION_ZSTD);
    out.extend_from_slice(&(key_id.len() as u16).to_be_bytes());
    out.extend_from_slice(key_id.as_bytes());
    out.extend_from_slice(&(wrapped_key.len() as u16).to_be_bytes());
    out.extend_from_slice(wrapped_key);
    out.extend_from_slice(&(segment_size as u32).to_be_bytes());
    out.extend_from_slice(nonce_prefix);
}

fn associated_data(header: &[u8], binding: &Binding<'_>) -> Vec<u8> {
    let mut aad = Vec::with_capacity(header.len() + 128);
    aad.extend_from_slice(b"hegemony-state segment v1\0");
    aad.extend_from_slice(header);
    binding.append_to(&mut aad);
    aad
}

/// Reads an object's header, so the caller can unwrap its data key.
///
/// # Errors
/// `NotAnEnvelope`, `UnsupportedFormat` or `TruncatedHeader`.
pub fn read_header(object: &[u8]) -> Result<Header, EnvelopeError> {
    let mut r = Reader { buf: object, at: 0 };
    if r.take(4)? != MAGIC {
        return Err(EnvelopeError::NotAnEnvelope);
    }
    let format = r.take(1)?[0];
    if format != FORMAT_VERSION {
        return Err(EnvelopeError::UnsupportedFormat(format));
    }
    let compression = r.take(1)?[0];
    if compression != COMPRESSION_ZSTD {
        return Err(EnvelopeError::UnsupportedFormat(format));
    }
    let key_len = r.u16()?;
    let key_id =
        String::from_utf8(r.take(key_len)?.to_vec()).map_err(|_| EnvelopeError::TruncatedHeader)?;
    let wrapped_len = r.u16()?;
    let wrapped_key = r.take(wrapped_len)?.to_vec();
    let segment_size = u32::from_be_bytes(r.take(4)?.try_into().expect("4 bytes")) as usize;
    if segment_size == 0 {
        return Err(EnvelopeError::TruncatedHeader);
    }
    let nonce_prefix = r.take(NONCE_PREFIX_SIZE)?.try_into().expect("7 bytes");
    Ok(Header {
        key_id,
        wrapped_key,
        segment_size,
        nonce_prefix,
        len: r.at,
    })
}

struct Reader<'a> {
    buf: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], EnvelopeError> {
        let end = self
            .at
            .checked_add(n)
            .ok_or(EnvelopeError::TruncatedHeader)?;
        let slice = self
            .buf
            .get(self.at..end)
            .ok_or(EnvelopeError::TruncatedHeader)?;
        self.at = end;
        Ok(slice)
    }

    fn u16(&mut self) -> Result<usize, EnvelopeError> {
        Ok(u16::from_be_bytes(self.take(2)?.try_into().expect("2 bytes")) as usize)
    }
}

/// Opens a sealed object whose data key has been unwrapped. `size_hint` (the recorded
/// plaintext size) sizes the output once, so a large state is never copied by regrowth.
///
/// # Errors
/// `Damaged` when any segment fails authentication (tampering, truncation, reordering, an
/// object moved to another binding); `Decompress` if authenticated content is not zstd.
pub fn open(
    object: &[u8],
    header: &Header,
    data_key: &[u8; 32],
    binding: &Binding<'_>,
    size_hint: usize,
) -> Result<Vec<u8>, EnvelopeError> {
    open_into(object, header, data_key, binding, size_hint, Vec::new())
}

/// [`open`] into `out`, emptied first: opening several objects one after another into one
/// buffer reuses its memory instead of asking the allocator for each plaintext anew.
///
/// # Errors
/// As [`open`].
pub fn open_into(
    object: &[u8],
    header: &Header,
    data_key: &[u8; 32],
    binding: &Binding<'_>,
    size_hint: usize,
    mut out: Vec<u8>,
) -> Result<Vec<u8>, EnvelopeError> {
    out.clear();
    out.reserve(size_hint);
    let aad = associated_data(&object[..header.len], binding);
    let cipher = Aes256Gcm::new(data_key.into());
    let mut decryptor = DecryptorBE32::from_aead(cipher, (&header.nonce_prefix).into());
    let mut decoder = zstd::stream::write::Decoder::new(out)
        .map_err(|e| EnvelopeError::Decompress(e.to_string()))?;
    let sealed = header.segment_size + TAG_SIZE;
    let mut rest = &object[header.len..];
    let mut segment = Vec::with_capacity(sealed);
    let decompress = |e: std::io::Error| EnvelopeError::Decompress(e.to_string());
    while rest.len() > sealed {
        segment.clear();
        segment.extend_from_slice(&rest[..sealed]);
        decryptor
            .decrypt_next_in_place(&aad, &mut segment)
            .map_err(|_| EnvelopeError::Damaged)?;
        decoder.write_all(&segment).map_err(decompress)?;
        rest = &rest[sealed..];
    }
    segment.clear();
    segment.extend_from_slice(rest);
    decryptor
        .decrypt_last_in_place(&aad, &mut segment)
        .map_err(|_| EnvelopeError::Damaged)?;
    decoder.write_all(&segment).map_err(decompress)?;
    decoder.flush().map_err(decompress)?;
    Ok(decoder.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: [u8; 32] = [7u8; 32];

    fn binding(version: u64) -> Binding<'static> {
        Binding {
            org: "acme",
            incarnation: "inc",
            version,
            blob_id: "b1",
        }
    }

    fn roundtrip(plaintext: &[u8]) -> Vec<u8> {
        let sealed = seal(plaintext, &KEY, "platform:abc", b"wrapped", &binding(1));
        let header = read_header(&sealed).unwrap();
        assert_eq!(header.key_id, "platform:abc");
        assert_eq!(header.wrapped_key, b"wrapped");
        open(&sealed, &header, &KEY, &binding(1), plaintext.len()).unwrap()
    }

    #[test]
    fn opening_into_a_used_buffer_gives_only_the_new_plaintext() {
        let (a, b) = (pseudo_random(200_000), b"small".to_vec());
        let sealed = seal(&b, &KEY, "platform:abc", b"wrapped", &binding(1));
        let header = read_header(&sealed).unwrap();
        let reused = open_into(&sealed, &header, &KEY, &binding(1), b.len(), a).unwrap();
        assert_eq!(reused, b);
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

    #[test]
    fn roundtrips_empty_small_and_multi_segment_content() {
        assert_eq!(roundtrip(b""), b"");
        assert_eq!(roundtrip(b"{\"version\":4}"), b"{\"version\":4}");
        // Incompressible data spans many segments, including an exact multiple.
        for n in [SEGMENT_SIZE * 3, SEGMENT_SIZE * 3 + 17, 1_000_000] {
            let data = pseudo_random(n);
            assert_eq!(roundtrip(&data), data);
        }
    }

    #[test]
    fn plaintext_never_appears_in_the_object() {
        let secret = b"{\"outputs\":{\"password\":\"hunter2-very-secret\"}}";
        let sealed = seal(secret, &KEY, "platform:abc", b"w", &binding(1));
        assert!(!sealed.windows(10).any(|w| w == b"hunter2-ve"));
    }

    #[test]
    fn another_binding_or_key_does_not_open() {
        let sealed = seal(b"state", &KEY, "platform:abc", b"w", &binding(1));
        let header = read_header(&sealed).unwrap();
        assert!(matches!(
            open(&sealed, &header, &KEY, &binding(2), 5),
            Err(EnvelopeError::Damaged)
        ));
        assert!(matches!(
            open(&sealed, &header, &[8u8; 32], &binding(1), 5),
            Err(EnvelopeError::Damaged)
        ));
    }

    #[test]
    fn truncation_tampering_and_header_edits_are_caught() {
        let data = pseudo_random(SEGMENT_SIZE * 2 + 5);
        let sealed = seal(&data, &KEY, "platform:abc", b"w", &binding(1));
        let header = read_header(&sealed).unwrap();
        // Cut at a segment boundary: the new last segment was not sealed as last.
        let cut = &sealed[..header.len + SEGMENT_SIZE + TAG_SIZE];
        assert!(matches!(
            open(cut, &header, &KEY, &binding(1), 0),
            Err(EnvelopeError::Damaged)
        ));
        let mut flipped = sealed.clone();
        let last = flipped.len() - 1;
        flipped[last] ^= 1;
        assert!(matches!(
            open(&flipped, &header, &KEY, &binding(1), 0),
            Err(EnvelopeError::Damaged)
        ));
        let mut edited = sealed.clone();
        edited[10] ^= 1; // inside the key id
        let h = read_header(&edited).unwrap();
        assert!(matches!(
            open(&edited, &h, &KEY, &binding(1), 0),
            Err(EnvelopeError::Damaged)
        ));
    }

    #[test]
    fn a_foreign_or_future_object_is_named_as_such() {
        assert!(matches!(
            read_header(b"PK\x03\x04..."),
            Err(EnvelopeError::NotAnEnvelope)
        ));
        let mut sealed = seal(b"x", &KEY, "k", b"w", &binding(1));
        sealed[4] = 9;
        assert!(matches!(
            read_header(&sealed),
            Err(EnvelopeError::UnsupportedFormat(9))
        ));
        assert!(matches!(
            read_header(&sealed[..8]),
            Err(EnvelopeError::UnsupportedFormat(9))
        ));
        assert!(matches!(
            read_header(b"HGST\x01\x01\x00"),
            Err(EnvelopeError::TruncatedHeader)
        ));
    }
}
