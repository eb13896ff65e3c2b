//! The sealed object: a self-describing header (magic, format, compression, segment
//! parameters), then the compressed plaintext in AES-256-GCM STREAM segments. Every segment's
//! associated data binds the header and the object's place (org, state incarnation, version,
//! blob id), so an object copied elsewhere, truncated, reordered or with an edited header does
//! not open. Format 2 (written) keeps a gzip member and no key material, so a re-wrap of the
//! data key never touches the object; format 1 (read only) keeps a zstd frame and the wrapped
//! data key in its header. Opening is in `opening.rs`.

use std::io::Write;

use aes_gcm::aead::rand_core::RngCore;
use aes_gcm::aead::stream::EncryptorBE32;
use aes_gcm::aead::{KeyInit, OsRng};
use aes_gcm::Aes256Gcm;

use super::gzip;

/// The first bytes of every sealed object.
pub const MAGIC: &[u8; 4] = b"HGST";
/// The format this code writes.
pub const FORMAT_VERSION: u8 = 2;
/// The first format: still read, never written.
const FORMAT_1: u8 = 1;
const COMPRESSION_ZSTD: u8 = 1;
const COMPRESSION_GZIP: u8 = 2;
/// Plaintext bytes (compressed state) per segment.
pub const SEGMENT_SIZE: usize = 64 * 1024;
pub(super) const TAG_SIZE: usize = 16;
/// STREAM with a 32-bit counter and a last-segment flag leaves 7 of GCM's 12 nonce bytes.
pub(super) const NONCE_PREFIX_SIZE: usize = 7;
/// A format-2 header: magic, format, compression, segment size, nonce prefix.
const HEADER_LEN: usize = MAGIC.len() + 2 + 4 + NONCE_PREFIX_SIZE;

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
    /// Reading an object as it is opened failed: the storage's fault, not the object's.
    #[error("the sealed object could not be read: {0}")]
    Unreadable(String),
}

/// How the plaintext inside the segments is compressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    /// Format 1: one zstd frame.
    Zstd,
    /// Format 2: one gzip member (RFC 1952), what a read that accepts gzip sends as it is.
    Gzip,
}

/// The wrapped data key a format-1 object carries in its header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeaderKey {
    /// What wrapped the data key: `platform:<fingerprint>`, `kms:<key arn>` or `transit:...`.
    pub key_id: String,
    pub wrapped: Vec<u8>,
}

/// The header of a sealed object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    pub compression: Compression,
    /// Format 1 only; a format-2 object's wrapped key is in its version's key slot.
    pub key: Option<HeaderKey>,
    pub(super) segment_size: usize,
    pub(super) nonce_prefix: [u8; NONCE_PREFIX_SIZE],
    /// Length of the header in bytes: where the segments start.
    pub(super) len: usize,
}

/// Seals `plaintext` under `data_key` for `binding`, in format 2. The data key's wrapped
/// form is not in the object: the caller keeps it in the version's key slot.
///
/// Memory grows with the compressed size only: the plaintext is deflated in pieces (on every
/// core when large) and each piece encrypted into the object as it comes, then dropped. The
/// object's buffer is reserved for the worst case (incompressible content) at once, so it is
/// never copied by regrowth; what is never written of it is never touched, and costs nothing.
pub fn seal(plaintext: &[u8], data_key: &[u8; 32], binding: &Binding<'_>) -> Vec<u8> {
    // Deflate adds at most 5 bytes per 16 KiB stored; each segment a 16-byte tag.
    let worst = plaintext.len() + plaintext.len() / 1024 + 4096;
    let mut out = Vec::with_capacity(worst + worst.div_ceil(SEGMENT_SIZE) * TAG_SIZE);
    // Writing to memory cannot fail.
    seal_into(plaintext, data_key, binding, &mut out).expect("sealing to memory");
    out
}

/// [`seal`], writing the object to `out` a segment at a time as it is made, so it is never
/// held whole: a large state sealed straight into its blob file.
///
/// # Errors
/// The first error `out` gives; what was written before it is a torn object.
pub fn seal_into(
    plaintext: &[u8],
    data_key: &[u8; 32],
    binding: &Binding<'_>,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    let mut nonce_prefix = [0u8; NONCE_PREFIX_SIZE];
    OsRng.fill_bytes(&mut nonce_prefix);
    let mut header = Vec::with_capacity(HEADER_LEN);
    header.extend_from_slice(MAGIC);
    header.push(FORMAT_VERSION);
    header.push(COMPRESSION_GZIP);
    header.extend_from_slice(&(SEGMENT_SIZE as u32).to_be_bytes());
    header.extend_from_slice(&nonce_prefix);
    let aad = associated_data(FORMAT_VERSION, &header, binding);
    out.write_all(&header)?;
    let cipher = Aes256Gcm::new(data_key.into());
    let mut sealer = Sealer {
        encryptor: EncryptorBE32::from_aead(cipher, (&nonce_prefix).into()),
        aad,
        pending: Vec::with_capacity(SEGMENT_SIZE + TAG_SIZE),
        out,
        failed: None,
    };
    // The pieces keep coming once `out` fails (they are deflated on other threads); the
    // first error is kept, and nothing more is written.
    gzip::compress(plaintext, |part| {
        if sealer.failed.is_none() {
            if let Err(e) = sealer.write_all(part) {
                sealer.failed = Some(e);
            }
        }
    });
    sealer.finish()
}

/// Compressed bytes in, encrypted segments out: a segment is sealed only once more data
/// follows it, so the last one always goes through `encrypt_last`.
struct Sealer<'a> {
    encryptor: EncryptorBE32<Aes256Gcm>,
    aad: Vec<u8>,
    pending: Vec<u8>,
    out: &'a mut dyn Write,
    failed: Option<std::io::Error>,
}

impl Sealer<'_> {
    fn finish(mut self) -> std::io::Result<()> {
        if let Some(e) = self.failed {
            return Err(e);
        }
        // The only encryption error is a STREAM counter overflow (2^32 segments of 64 KiB
        // = 256 TiB), far beyond any state.
        self.encryptor
            .encrypt_last_in_place(&self.aad, &mut self.pending)
            .expect("last segment seals");
        self.out.write_all(&self.pending)
    }
}

impl Write for Sealer<'_> {
    fn write(&mut self, mut buf: &[u8]) -> std::io::Result<usize> {
        let n = buf.len();
        while !buf.is_empty() {
            if self.pending.len() == SEGMENT_SIZE {
                self.encryptor
                    .encrypt_next_in_place(&self.aad, &mut self.pending)
                    .map_err(|_| std::io::Error::other("STREAM counter overflow"))?;
                self.out.write_all(&self.pending)?;
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

/// The associated data of every segment of an object of `format`: a label naming the
/// format, the header bytes, and the binding.
pub(super) fn associated_data(format: u8, header: &[u8], binding: &Binding<'_>) -> Vec<u8> {
    let mut aad = Vec::with_capacity(header.len() + 128);
    aad.extend_from_slice(if format == FORMAT_1 {
        b"hegemony-state segment v1\0"
    } else {
        b"hegemony-state segment v2\0"
    });
    aad.extend_from_slice(header);
    binding.append_to(&mut aad);
    aad
}

/// Reads an object's header (either format), so the caller can find and unwrap its data key.
///
/// # Errors
/// `NotAnEnvelope`, `UnsupportedFormat` or `TruncatedHeader`.
pub fn read_header(object: &[u8]) -> Result<Header, EnvelopeError> {
    let mut r = Reader { buf: object, at: 0 };
    if r.take(4)? != MAGIC {
        return Err(EnvelopeError::NotAnEnvelope);
    }
    let format = r.take(1)?[0];
    let compression = match (format, r.take(1)?[0]) {
        (FORMAT_1, COMPRESSION_ZSTD) => Compression::Zstd,
        (FORMAT_VERSION, COMPRESSION_GZIP) => Compression::Gzip,
        _ => return Err(EnvelopeError::UnsupportedFormat(format)),
    };
    let key = if format == FORMAT_1 {
        let key_len = r.u16()?;
        let key_id = String::from_utf8(r.take(key_len)?.to_vec())
            .map_err(|_| EnvelopeError::TruncatedHeader)?;
        let wrapped_len = r.u16()?;
        let wrapped = r.take(wrapped_len)?.to_vec();
        Some(HeaderKey { key_id, wrapped })
    } else {
        None
    };
    let segment_size = u32::from_be_bytes(r.take(4)?.try_into().expect("4 bytes")) as usize;
    if segment_size == 0 {
        return Err(EnvelopeError::TruncatedHeader);
    }
    let nonce_prefix = r.take(NONCE_PREFIX_SIZE)?.try_into().expect("7 bytes");
    Ok(Header {
        compression,
        key,
        segment_size,
        nonce_prefix,
        len: r.at,
    })
}

impl Header {
    /// The format number the object was sealed in.
    pub(super) fn format(&self) -> u8 {
        match self.compression {
            Compression::Zstd => FORMAT_1,
            Compression::Gzip => FORMAT_VERSION,
        }
    }
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
