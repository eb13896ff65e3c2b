//! Opening a sealed object (either format) once its data key is unwrapped: segment by
//! segment, so a read holds the sealed bytes or one segment of them and nothing more. An
//! object in memory is opened in its own buffer; one read from a file as it is opened
//! ([`Opening::reading`]) goes through one segment's buffer. A format-2 object's opened
//! segments are its gzip member, sent as they are; [`Inflating`] turns them into the
//! plaintext for a client that refuses gzip; [`open_into`] gives the whole plaintext of
//! either format.

use std::io::{Read, Write};

use aes_gcm::aead::{AeadInPlace, KeyInit};
use aes_gcm::{Aes256Gcm, Nonce, Tag};

use super::envelope::{
    associated_data, Binding, Compression, EnvelopeError, Header, NONCE_PREFIX_SIZE, TAG_SIZE,
};

/// Where an opening's sealed bytes are.
enum Source {
    /// The whole object, each segment opened where it lies.
    Whole(Vec<u8>),
    /// The object past its header, read a segment at a time into `segment`.
    Reading {
        rest: Box<dyn Read + Send>,
        segment: Vec<u8>,
    },
}

/// A sealed object being opened. The first segment is opened when this is made, so a wrong
/// key, an edited header or an object moved to another binding fails before anything is
/// sent; a later segment that fails authentication stops the opening there.
pub struct Opening {
    source: Source,
    /// The object's length, header included.
    len: u64,
    cipher: Aes256Gcm,
    nonce_prefix: [u8; NONCE_PREFIX_SIZE],
    aad: Vec<u8>,
    compression: Compression,
    /// A sealed segment's size (the last may be shorter).
    sealed: usize,
    /// Where the next sealed segment starts, from the object's first byte.
    at: u64,
    position: u32,
    /// The opened first segment, not yet handed out.
    first: Option<(usize, usize)>,
    done: bool,
    /// Where the segments start.
    header_len: usize,
}

impl Opening {
    /// Starts opening `object` (whose header is `header`) with `data_key` for `binding`.
    ///
    /// # Errors
    /// `Damaged` when the first segment does not authenticate.
    pub fn new(
        object: Vec<u8>,
        header: &Header,
        data_key: &[u8; 32],
        binding: &Binding<'_>,
    ) -> Result<Self, EnvelopeError> {
        let aad = associated_data(header.format(), &object[..header.len], binding);
        let len = object.len() as u64;
        Self::start(Source::Whole(object), len, aad, header, data_key)
    }

    /// Starts opening an object of `len` bytes that is read as it is opened: `head` is its
    /// first bytes (its header and perhaps more), `rest` reads the bytes after `head`.
    ///
    /// # Errors
    /// `Damaged` when the first segment does not authenticate; `Unreadable` when it cannot
    /// be read.
    pub fn reading(
        head: Vec<u8>,
        rest: Box<dyn Read + Send>,
        len: u64,
        header: &Header,
        data_key: &[u8; 32],
        binding: &Binding<'_>,
    ) -> Result<Self, EnvelopeError> {
        let aad = associated_data(header.format(), &head[..header.len], binding);
        let mut after_header = std::io::Cursor::new(head);
        after_header.set_position(header.len as u64);
        let source = Source::Reading {
            rest: Box::new(after_header.chain(rest)),
            segment: Vec::with_capacity(header.segment_size + TAG_SIZE),
        };
        Self::start(source, len, aad, header, data_key)
    }

    fn start(
        source: Source,
        len: u64,
        aad: Vec<u8>,
        header: &Header,
        data_key: &[u8; 32],
    ) -> Result<Self, EnvelopeError> {
        let mut opening = Opening {
            source,
            len,
            cipher: Aes256Gcm::new(data_key.into()),
            nonce_prefix: header.nonce_prefix,
            aad,
            compression: header.compression,
            sealed: header.segment_size + TAG_SIZE,
            at: header.len as u64,
            position: 0,
            first: None,
            done: false,
            header_len: header.len,
        };
        opening.first = opening.open_segment()?;
        Ok(opening)
    }

    /// How the opened bytes are compressed.
    pub fn compression(&self) -> Compression {
        self.compression
    }

    /// How many bytes the segments hold once opened (the compressed plaintext's length),
    /// known before any is opened past the first: what a gzip answer's Content-Length says.
    pub fn opened_len(&self) -> u64 {
        let rest = self.len - self.header_len as u64;
        let segments = rest.div_ceil(self.sealed as u64).max(1);
        rest.saturating_sub(segments * TAG_SIZE as u64)
    }

    /// Opens the next segment and returns its bytes; `None` after the last.
    ///
    /// # Errors
    /// `Damaged` when the segment does not authenticate, `Unreadable` when it cannot be
    /// read; the opening ends there.
    pub fn next_segment(&mut self) -> Result<Option<&[u8]>, EnvelopeError> {
        let range = match self.first.take() {
            Some(range) => Some(range),
            None => self.open_segment()?,
        };
        let bytes = match &self.source {
            Source::Whole(object) => object,
            Source::Reading { segment, .. } => segment,
        };
        Ok(range.map(|(start, end)| &bytes[start..end]))
    }

    /// Decrypts the next segment in place: the range of its plaintext in the source's
    /// buffer, `None` when the last is done.
    fn open_segment(&mut self) -> Result<Option<(usize, usize)>, EnvelopeError> {
        if self.done {
            return Ok(None);
        }
        let rest = self.len - self.at;
        let last = rest <= self.sealed as u64;
        // At most one sealed segment, so it fits a usize.
        let len = if last { rest as usize } else { self.sealed };
        if len < TAG_SIZE {
            self.done = true;
            return Err(EnvelopeError::Damaged);
        }
        let (buffer, start) = match &mut self.source {
            // The object is in memory, so its length is a usize.
            Source::Whole(object) => (object, self.at as usize),
            Source::Reading { rest, segment } => {
                segment.resize(len, 0);
                if let Err(e) = rest.read_exact(segment) {
                    self.done = true;
                    return Err(EnvelopeError::Unreadable(e.to_string()));
                }
                (segment, 0)
            }
        };
        let mut nonce = [0u8; 12];
        nonce[..NONCE_PREFIX_SIZE].copy_from_slice(&self.nonce_prefix);
        nonce[NONCE_PREFIX_SIZE..11].copy_from_slice(&self.position.to_be_bytes());
        nonce[11] = u8::from(last);
        let (body, tag) = buffer[start..start + len].split_at_mut(len - TAG_SIZE);
        let tag = Tag::clone_from_slice(tag);
        let opened =
            self.cipher
                .decrypt_in_place_detached(Nonce::from_slice(&nonce), &self.aad, body, &tag);
        if opened.is_err() {
            self.done = true;
            return Err(EnvelopeError::Damaged);
        }
        self.at += len as u64;
        self.done = last;
        // Past 2^32 segments (256 TiB) STREAM's counter would repeat: no object is that large.
        self.position = self.position.checked_add(1).ok_or(EnvelopeError::Damaged)?;
        Ok(Some((start, start + len - TAG_SIZE)))
    }

    /// Every opened byte, gathered: for an object in memory, in its own buffer (each
    /// segment moved down over the header and the tags before it), so the whole compressed
    /// plaintext takes no second buffer; for one read as it is opened, in one buffer of
    /// that size.
    ///
    /// # Errors
    /// `Damaged` or `Unreadable` as [`Opening::next_segment`].
    pub fn into_opened(mut self) -> Result<Vec<u8>, EnvelopeError> {
        let mut gathered = Vec::new();
        if matches!(self.source, Source::Reading { .. }) {
            // No more than the object's length, which is a file's on this machine.
            gathered.reserve(self.opened_len() as usize);
        }
        let mut out = 0;
        loop {
            let range = match self.first.take() {
                Some(range) => Some(range),
                None => self.open_segment()?,
            };
            let Some((start, end)) = range else { break };
            match &mut self.source {
                Source::Whole(object) => object.copy_within(start..end, out),
                Source::Reading { segment, .. } => gathered.extend_from_slice(&segment[start..end]),
            }
            out += end - start;
        }
        Ok(match self.source {
            Source::Whole(mut object) => {
                object.truncate(out);
                object
            }
            Source::Reading { .. } => gathered,
        })
    }
}

/// A format-2 opening turned back into the plaintext, a segment's worth at a time: for a
/// client that does not accept gzip.
pub struct Inflating {
    opening: Opening,
    decoder: Option<flate2::write::GzDecoder<Vec<u8>>>,
}

impl Inflating {
    /// # Errors
    /// `Decompress` when the opening is not of a gzip (format-2) object.
    pub fn new(opening: Opening) -> Result<Self, EnvelopeError> {
        if opening.compression != Compression::Gzip {
            return Err(EnvelopeError::Decompress("not a gzip object".into()));
        }
        Ok(Self {
            opening,
            decoder: Some(flate2::write::GzDecoder::new(Vec::new())),
        })
    }

    /// The next piece of plaintext (possibly empty while the decoder holds it back);
    /// `None` once all is given.
    ///
    /// # Errors
    /// `Damaged` or `Decompress`; the stream ends there.
    pub fn next_chunk(&mut self) -> Result<Option<Vec<u8>>, EnvelopeError> {
        let Some(decoder) = self.decoder.as_mut() else {
            return Ok(None);
        };
        let decompress = |e: std::io::Error| EnvelopeError::Decompress(e.to_string());
        match self.opening.next_segment()? {
            Some(segment) => {
                decoder.write_all(segment).map_err(decompress)?;
                Ok(Some(std::mem::take(decoder.get_mut())))
            }
            None => {
                let decoder = self.decoder.take().expect("checked above");
                Ok(Some(decoder.finish().map_err(decompress)?))
            }
        }
    }
}

/// Opens the whole plaintext (either format) into `out`, emptied first: opening several
/// objects one after another into one buffer reuses its memory. `size_hint` (the recorded
/// plaintext size) sizes the output once, so a large state is never copied by regrowth.
///
/// # Errors
/// `Damaged` when any segment fails authentication (tampering, truncation, reordering, an
/// object moved to another binding); `Decompress` if authenticated content does not
/// decompress.
pub fn open_into(
    mut opening: Opening,
    size_hint: usize,
    mut out: Vec<u8>,
) -> Result<Vec<u8>, EnvelopeError> {
    out.clear();
    out.reserve(size_hint);
    let decompress = |e: std::io::Error| EnvelopeError::Decompress(e.to_string());
    match opening.compression {
        Compression::Zstd => {
            let mut decoder = zstd::stream::write::Decoder::new(out).map_err(decompress)?;
            while let Some(segment) = opening.next_segment()? {
                decoder.write_all(segment).map_err(decompress)?;
            }
            decoder.flush().map_err(decompress)?;
            Ok(decoder.into_inner())
        }
        Compression::Gzip => {
            let mut decoder = flate2::write::GzDecoder::new(out);
            while let Some(segment) = opening.next_segment()? {
                decoder.write_all(segment).map_err(decompress)?;
            }
            decoder.finish().map_err(decompress)
        }
    }
}

#[cfg(test)]
mod tests;
