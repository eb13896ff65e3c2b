//! The compressed form a sealed object keeps: one gzip member (RFC 1952), so a read that
//! accepts gzip sends it as it is. A large plaintext is deflated in 1 MiB pieces on every
//! core and the pieces joined into that one member, as pigz does: every piece but the last
//! ends on a sync flush (byte-aligned, not final), each is primed with the 32 KiB before it,
//! and the pieces' CRC-32s are combined. One member, not several, because some clients
//! (browsers among them) stop reading at the end of the first. The pieces are handed on in
//! order as they are done, so only a few are ever held besides the caller's output.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use flate2::{Compress, Compression, Crc, FlushCompress, Status};

/// The plaintext deflated per piece; below two pieces, no thread is started.
const PIECE: usize = 1 << 20;
/// Deflate's window: the bytes before a piece that prime its dictionary.
const WINDOW: usize = 32 * 1024;
/// Level 2: the save path is bound by compression, so a fast level; but the backend's level
/// 1 is a quick mode with fixed codes that leaves a Terraform state about 55% larger than
/// level 2 does (measured on the benchmark's state: 13.7 MB against 8.8 MB for 32 MiB, level
/// 6 being 8.77 MB), which a save's memory and every read would carry.
const LEVEL: u32 = 2;

/// gzip's fixed header: deflate, no name or comment, no time, no level flag, unknown OS.
const HEADER: [u8; 10] = [0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 255];

/// Hands the gzip member of `plaintext` to `sink`, in order: the header, each piece's deflate
/// output, the trailer. The caller encrypts each part as it comes, so the whole member is
/// never held twice. Each thread keeps one deflate stream, and the pieces' buffers go back
/// to a pool once handed on: a save allocates a few of each, not one per piece (freed large
/// buffers a thread allocated are kept by the allocator, and would add up).
pub fn compress(plaintext: &[u8], mut sink: impl FnMut(&[u8])) {
    let count = plaintext.len().div_ceil(PIECE).max(1);
    let pool: Mutex<Vec<Vec<u8>>> = Mutex::new(Vec::new());
    let piece = |stream: &mut Compress, i: usize| {
        let start = i * PIECE;
        let end = (start + PIECE).min(plaintext.len());
        let primer = &plaintext[start.saturating_sub(WINDOW)..start];
        // A poisoned pool only means another piece's thread panicked; the buffers are fine.
        let buffer = pool
            .lock()
            .map_or(None, |mut p| p.pop())
            .unwrap_or_default();
        deflate(
            stream,
            buffer,
            primer,
            &plaintext[start..end],
            i + 1 == count,
        )
    };
    let mut hand_on = |deflated: Vec<u8>| {
        sink(&deflated);
        if let Ok(mut pool) = pool.lock() {
            pool.push(deflated);
        }
    };
    hand_on(HEADER.to_vec());
    let mut crc = Crc::new();
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    if count == 1 || threads == 1 {
        let mut stream = new_stream();
        for i in 0..count {
            let (deflated, piece_crc) = piece(&mut stream, i);
            crc.combine(&piece_crc);
            hand_on(deflated);
        }
    } else {
        let next = AtomicUsize::new(0);
        std::thread::scope(|scope| {
            // Bounded: a worker ahead of the sink waits instead of piling up pieces.
            let (done, finished) = std::sync::mpsc::sync_channel(threads);
            for _ in 0..threads.min(count) {
                let (done, next, piece) = (done.clone(), &next, &piece);
                scope.spawn(move || {
                    let mut stream = new_stream();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        if i >= count || done.send((i, piece(&mut stream, i))).is_err() {
                            break;
                        }
                    }
                });
            }
            drop(done);
            // Pieces finish out of order; each is handed on once those before it have been.
            let mut waiting = BTreeMap::new();
            let mut due = 0;
            for (i, deflated) in finished {
                waiting.insert(i, deflated);
                while let Some((deflated, piece_crc)) = waiting.remove(&due) {
                    crc.combine(&piece_crc);
                    hand_on(deflated);
                    due += 1;
                }
            }
            // A worker only deflates into memory: the channel ends early only if one
            // panicked, a defect that the scope then raises as this request's panic.
            assert_eq!(due, count, "every piece deflated");
        });
    }
    let mut trailer = crc.sum().to_le_bytes().to_vec();
    // ISIZE is the length modulo 2^32 (RFC 1952), so the truncation is the format's.
    trailer.extend_from_slice(&(plaintext.len() as u32).to_le_bytes());
    sink(&trailer);
}

/// A raw deflate stream (no zlib or gzip framing: the member's framing is written here).
fn new_stream() -> Compress {
    Compress::new(Compression::new(LEVEL), false)
}

/// Raw deflate of one piece into `out` (emptied first), on `stream` (reset first) primed with
/// the bytes before the piece; the last piece ends the stream, the others end on a sync
/// flush so the next can follow on a byte boundary.
fn deflate(
    stream: &mut Compress,
    mut out: Vec<u8>,
    primer: &[u8],
    piece: &[u8],
    last: bool,
) -> (Vec<u8>, Crc) {
    let mut crc = Crc::new();
    crc.update(piece);
    stream.reset();
    if !primer.is_empty() {
        // Priming a raw stream before its first byte cannot fail.
        stream.set_dictionary(primer).expect("deflate dictionary");
    }
    let flush = if last {
        FlushCompress::Finish
    } else {
        FlushCompress::Sync
    };
    out.clear();
    out.reserve(piece.len() / 3 + 64);
    loop {
        if out.capacity() - out.len() < 64 {
            out.reserve(out.capacity().max(4096));
        }
        let consumed = stream.total_in() as usize;
        // Deflating into memory has no error but a misuse of the stream, which this loop
        // does not make.
        let status = stream
            .compress_vec(&piece[consumed..], &mut out, flush)
            .expect("deflate to memory");
        let done = match status {
            Status::StreamEnd => true,
            // A flush is complete once all input is taken and room is left over.
            Status::Ok | Status::BufError => {
                !last && stream.total_in() as usize == piece.len() && out.len() < out.capacity()
            }
        };
        if done {
            return (out, crc);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    fn gzip(plain: &[u8]) -> Vec<u8> {
        let mut member = Vec::new();
        compress(plain, |part| member.extend_from_slice(part));
        member
    }

    fn gunzip_single_member(member: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(member)
            .read_to_end(&mut out)
            .unwrap();
        out
    }

    fn text(n: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(n);
        let mut i = 0u64;
        while out.len() < n {
            out.extend_from_slice(
                format!("{{\"id\":\"r{i}\",\"x\":{}}},\n", i * 7919 % 1013).as_bytes(),
            );
            i += 1;
        }
        out.truncate(n);
        out
    }

    /// A single-member reader (as a browser's is) gets every byte back, also when the
    /// plaintext was deflated on several threads.
    #[test]
    fn one_member_holds_the_whole_plaintext_at_every_size() {
        for n in [0, 1, 1000, PIECE - 1, PIECE, PIECE * 3 + 12_345] {
            let plain = text(n);
            let member = gzip(&plain);
            assert_eq!(gunzip_single_member(&member), plain, "{n} bytes");
        }
    }

    /// Primed with the window before it, each piece compresses about as well as one
    /// stream would.
    #[test]
    fn a_large_plaintext_is_deflated_in_pieces_that_shrink_it_as_one_stream_would() {
        use std::io::Write;
        let plain = text(PIECE * 4);
        let mut parts = 0;
        compress(&plain, |_| parts += 1);
        assert_eq!(parts, 2 + 4, "the header, four pieces, the trailer");
        let member = gzip(&plain);
        let mut one = flate2::write::GzEncoder::new(Vec::new(), Compression::new(LEVEL));
        one.write_all(&plain).unwrap();
        let one = one.finish().unwrap();
        assert!(
            member.len() * 100 <= one.len() * 101,
            "{} vs {}",
            member.len(),
            one.len()
        );
    }
}
