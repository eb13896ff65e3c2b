//! The compressed form a sealed object keeps: one gzip member (RFC 1952), so a read that
//! accepts gzip sends it as it is. A large plaintext is deflated in pieces on several threads
//! and the pieces joined into that one member, as pigz does: every piece but the last ends on
//! a sync flush (byte-aligned, not final), each is primed with the 32 KiB before it, and the
//! pieces' CRC-32s are combined. One member, not several, because some clients (browsers
//! among them) stop reading at the end of the first.

use flate2::{Compress, Compression, Crc, FlushCompress, Status};

/// Below this a plaintext is deflated in one piece: a thread costs more than it saves.
const PIECE_MIN: usize = 1 << 20;
/// Deflate's window: the bytes before a piece that prime its dictionary.
const WINDOW: usize = 32 * 1024;
/// Level 1: the save path is bound by compression, and JSON still shrinks several times.
const LEVEL: u32 = 1;

/// gzip's fixed header: deflate, no name or comment, no time, "fastest" (level 1), unknown OS.
const HEADER: [u8; 10] = [0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 4, 255];

/// The gzip member of `plaintext`, as parts to be written in order: the header, each piece's
/// deflate output, the trailer. Handing the parts over, not one joined buffer, lets the
/// caller encrypt each as it goes and drop it.
pub fn compress(plaintext: &[u8]) -> Vec<Vec<u8>> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let count = (plaintext.len() / PIECE_MIN).clamp(1, threads);
    let size = plaintext.len().div_ceil(count).max(1);
    let starts: Vec<usize> = (0..count)
        .map(|i| (i * size).min(plaintext.len()))
        .collect();
    let piece = |i: usize| {
        let start = starts[i];
        let end = starts.get(i + 1).copied().unwrap_or(plaintext.len());
        let primer = &plaintext[start.saturating_sub(WINDOW)..start];
        deflate(primer, &plaintext[start..end], i + 1 == count)
    };
    let pieces: Vec<(Vec<u8>, Crc)> = if count == 1 {
        vec![piece(0)]
    } else {
        std::thread::scope(|scope| {
            let others: Vec<_> = (1..count).map(|i| scope.spawn(move || piece(i))).collect();
            let mut pieces = vec![piece(0)];
            // A piece's thread only deflates into memory: it cannot panic short of a defect,
            // which would then be this request's panic, as if it had happened here.
            pieces.extend(
                others
                    .into_iter()
                    .map(|h| h.join().expect("deflate thread")),
            );
            pieces
        })
    };
    let mut crc = Crc::new();
    let mut parts = Vec::with_capacity(count + 2);
    parts.push(HEADER.to_vec());
    for (deflated, piece_crc) in pieces {
        crc.combine(&piece_crc);
        parts.push(deflated);
    }
    let mut trailer = crc.sum().to_le_bytes().to_vec();
    // ISIZE is the length modulo 2^32 (RFC 1952), so the truncation is the format's.
    trailer.extend_from_slice(&(plaintext.len() as u32).to_le_bytes());
    parts.push(trailer);
    parts
}

/// Raw deflate of one piece, primed with the bytes before it; the last piece ends the
/// stream, the others end on a sync flush so the next can follow on a byte boundary.
fn deflate(primer: &[u8], piece: &[u8], last: bool) -> (Vec<u8>, Crc) {
    let mut crc = Crc::new();
    crc.update(piece);
    let mut c = Compress::new(Compression::new(LEVEL), false);
    if !primer.is_empty() {
        // Priming a raw stream before its first byte cannot fail.
        c.set_dictionary(primer).expect("deflate dictionary");
    }
    let flush = if last {
        FlushCompress::Finish
    } else {
        FlushCompress::Sync
    };
    let mut out = Vec::with_capacity(piece.len() / 4 + 64);
    loop {
        if out.capacity() - out.len() < 64 {
            out.reserve(out.capacity().max(4096));
        }
        let consumed = c.total_in() as usize;
        // Deflating into memory has no error but a misuse of the stream, which this loop
        // does not make.
        let status = c
            .compress_vec(&piece[consumed..], &mut out, flush)
            .expect("deflate to memory");
        let done = match status {
            Status::StreamEnd => true,
            // A flush is complete once all input is taken and room is left over.
            Status::Ok | Status::BufError => {
                !last && c.total_in() as usize == piece.len() && out.len() < out.capacity()
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
        for n in [0, 1, 1000, PIECE_MIN - 1, PIECE_MIN * 3 + 12_345] {
            let plain = text(n);
            let member = compress(&plain).concat();
            assert_eq!(gunzip_single_member(&member), plain, "{n} bytes");
        }
    }

    /// Primed with the window before it, each piece compresses about as well as one
    /// stream would.
    #[test]
    fn a_large_plaintext_is_deflated_in_pieces_that_shrink_it_as_one_stream_would() {
        use std::io::Write;
        let plain = text(PIECE_MIN * 4);
        let parts = compress(&plain);
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        assert_eq!(parts.len(), 2 + threads.min(4));
        let member = parts.concat();
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
