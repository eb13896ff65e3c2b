//! Watching the chunk sizes request bodies announce, as their bytes are read off the
//! connection: a chunked body whose size line alone passes its route's limit (`10000000000`,
//! 2^40 bytes) is refused at once, as a declared `Content-Length` over the limit is, instead
//! of waiting for data that may never come. hyper's decoder hands over a chunk's data, never
//! its size, so the watch follows the connection's request framing beside it: heads parsed
//! by httparse (as hyper parses them), then a `Content-Length` body skipped or a chunked one
//! followed through its size lines. It only reports; hyper alone decides what the bytes
//! mean, and a stream the watch cannot follow (a head hyper would refuse) is no longer
//! watched, which costs the early answer and nothing else.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::watch;

/// What the chunk sizes of one request's body announce so far: request `request` (the
/// connection's first is 0) will have sent `bytes` once the chunk being read is whole.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Announcement {
    pub request: u64,
    pub bytes: u64,
}

/// The most head bytes followed: past hyper's own buffer limit (about 400 KiB), which
/// refuses the request first.
const MAX_HEAD_BYTES: usize = 512 * 1024;

/// The most header lines a head may have: hyper's default.
const MAX_HEADERS: usize = 100;

/// Where in the connection's stream of requests the watch is.
#[derive(Debug)]
enum State {
    /// A request head, its bytes so far.
    Head(Vec<u8>),
    /// A body of known length: the bytes still to come.
    Length(u64),
    /// A chunked body.
    Chunked(Chunk),
    /// Lost track: nothing more is reported on this connection.
    Lost,
}

/// Where in a chunked body: the states of hyper's chunked decoder.
#[derive(Debug, Clone, Copy)]
enum Chunk {
    /// The size's hex digits.
    Size(u64),
    /// White space after the size.
    SizeSpace(u64),
    /// A chunk extension, ignored up to its CR.
    Extension(u64),
    /// The LF ending the size line.
    SizeLf(u64),
    /// The chunk's data: the bytes still to come.
    Data(u64),
    DataCr,
    DataLf,
    /// After the last chunk: a trailer line, or the final CRLF.
    TrailerStart,
    Trailer,
    TrailerLf,
    EndLf,
}

/// The framing of one connection's requests, fed the bytes read off it in order.
#[derive(Debug)]
pub struct Framing {
    state: State,
    /// The request whose head or body is being read.
    request: u64,
    /// The data bytes of the current body's chunks whose size lines are whole.
    finished: u64,
    /// The last announcement made for the current request.
    announced: u64,
}

impl Default for Framing {
    fn default() -> Self {
        Self {
            state: State::Head(Vec::new()),
            request: 0,
            finished: 0,
            announced: 0,
        }
    }
}

impl Framing {
    /// Follows `bytes`, the next read off the connection; returns what they announce anew.
    pub fn feed(&mut self, mut bytes: &[u8]) -> Option<Announcement> {
        let mut announced = None;
        while !bytes.is_empty() {
            bytes = match &mut self.state {
                State::Lost => return announced,
                State::Head(head) => {
                    let before = head.len();
                    head.extend_from_slice(bytes);
                    let total = head.len();
                    match body_of(head) {
                        Head::Partial if total <= MAX_HEAD_BYTES => return announced,
                        Head::Partial | Head::Refused => {
                            self.state = State::Lost;
                            return announced;
                        }
                        // The head's last read may carry the start of its body. The head was
                        // not whole before this read, so it ends within it.
                        Head::Complete { len, body } => {
                            self.state = body;
                            self.finished = 0;
                            self.announced = 0;
                            self.next_if_done();
                            &bytes[len - before..]
                        }
                    }
                }
                State::Length(left) => {
                    let n = usize::try_from(*left)
                        .unwrap_or(usize::MAX)
                        .min(bytes.len());
                    *left -= n as u64;
                    self.next_if_done();
                    &bytes[n..]
                }
                State::Chunked(chunk) => {
                    let (rest, found) = step(chunk, bytes, self.finished);
                    match found {
                        Step::Same => {}
                        Step::Sized(size) => self.finished = self.finished.saturating_add(size),
                        Step::Ended => {
                            self.request += 1;
                            self.state = State::Head(Vec::new());
                        }
                        Step::Lost => self.state = State::Lost,
                        Step::Announced(total) if total > self.announced => {
                            self.announced = total;
                            announced = Some(Announcement {
                                request: self.request,
                                bytes: total,
                            });
                        }
                        Step::Announced(_) => {}
                    }
                    rest
                }
            };
        }
        announced
    }

    /// A body that is whole: on to the next request's head.
    fn next_if_done(&mut self) {
        if matches!(self.state, State::Length(0)) {
            self.request += 1;
            self.state = State::Head(Vec::new());
        }
    }
}

/// What a head's bytes so far make.
enum Head {
    Partial,
    /// A head hyper answers with an error (or one the watch cannot follow).
    Refused,
    /// `len` bytes of head, and the body that follows it.
    Complete {
        len: usize,
        body: State,
    },
}

/// Parses `head` as hyper does, and finds the body's framing as hyper does: the last
/// `Transfer-Encoding` ending in `chunked`, else `Content-Length` (every value the same),
/// else none.
fn body_of(head: &[u8]) -> Head {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut request = httparse::Request::new(&mut headers);
    let len = match request.parse(head) {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) => return Head::Partial,
        Err(_) => return Head::Refused,
    };
    let named = |name: &str| -> Vec<&[u8]> {
        request
            .headers
            .iter()
            .filter(|h| h.name.eq_ignore_ascii_case(name))
            .map(|h| h.value)
            .collect()
    };
    let body = if let Some(last) = named("transfer-encoding").last() {
        let chunked = std::str::from_utf8(last)
            .ok()
            .and_then(|v| v.rsplit(',').next())
            .is_some_and(|coding| coding.trim().eq_ignore_ascii_case("chunked"));
        if !chunked || request.version == Some(0) {
            return Head::Refused;
        }
        State::Chunked(Chunk::Size(0))
    } else {
        let lengths = named("content-length");
        let mut lengths = lengths
            .iter()
            .flat_map(|v| v.split(|b| *b == b','))
            .map(|v| std::str::from_utf8(v).ok()?.trim().parse::<u64>().ok());
        match lengths.next() {
            None => State::Length(0),
            Some(Some(first)) if lengths.all(|n| n == Some(first)) => State::Length(first),
            Some(_) => return Head::Refused,
        }
    };
    Head::Complete { len, body }
}

/// What a step through a chunked body found.
enum Step {
    Same,
    /// A size line grew: the data of the chunks before plus this chunk's size so far.
    Announced(u64),
    /// A size line ended: its chunk's data, this long, follows.
    Sized(u64),
    /// The body ended (its last chunk and trailers).
    Ended,
    Lost,
}

/// Takes what `bytes` hold of the chunked body at `chunk` (one byte, or a run of a chunk's
/// data) and returns the rest, `before` being the data of the chunks before this one.
fn step<'a>(chunk: &mut Chunk, bytes: &'a [u8], before: u64) -> (&'a [u8], Step) {
    if let Chunk::Data(left) = chunk {
        let n = usize::try_from(*left)
            .unwrap_or(usize::MAX)
            .min(bytes.len());
        *left -= n as u64;
        if *left == 0 {
            *chunk = Chunk::DataCr;
        }
        return (&bytes[n..], Step::Same);
    }
    let (b, rest) = (bytes[0], &bytes[1..]);
    let (next, found) = match (*chunk, b) {
        (Chunk::Size(size), b) if b.is_ascii_hexdigit() => {
            // Past u64 hyper refuses the body; saturated, it is over any limit here too.
            let digit = u64::from((b as char).to_digit(16).unwrap_or(0));
            let size = size.saturating_mul(16).saturating_add(digit);
            (
                Chunk::Size(size),
                Step::Announced(before.saturating_add(size)),
            )
        }
        (Chunk::Size(size) | Chunk::SizeSpace(size), b' ' | b'\t') => {
            (Chunk::SizeSpace(size), Step::Same)
        }
        (Chunk::Size(size) | Chunk::SizeSpace(size) | Chunk::Extension(size), b';') => {
            (Chunk::Extension(size), Step::Same)
        }
        (Chunk::Size(size) | Chunk::SizeSpace(size) | Chunk::Extension(size), b'\r') => {
            (Chunk::SizeLf(size), Step::Same)
        }
        (Chunk::Extension(_), b'\n') => return (rest, Step::Lost),
        (Chunk::Extension(size), _) => (Chunk::Extension(size), Step::Same),
        (Chunk::SizeLf(0), b'\n') => (Chunk::TrailerStart, Step::Same),
        (Chunk::SizeLf(size), b'\n') => (Chunk::Data(size), Step::Sized(size)),
        (Chunk::DataCr, b'\r') => (Chunk::DataLf, Step::Same),
        (Chunk::DataLf, b'\n') => (Chunk::Size(0), Step::Same),
        (Chunk::TrailerStart, b'\r') => (Chunk::EndLf, Step::Same),
        (Chunk::Trailer, b'\r') => (Chunk::TrailerLf, Step::Same),
        (Chunk::TrailerStart | Chunk::Trailer, _) => (Chunk::Trailer, Step::Same),
        (Chunk::TrailerLf, b'\n') => (Chunk::TrailerStart, Step::Same),
        (Chunk::EndLf, b'\n') => return (rest, Step::Ended),
        _ => return (rest, Step::Lost),
    };
    *chunk = next;
    (rest, found)
}

/// A connection's stream, its reads followed by a [`Framing`] whose announcements go to
/// `announce`; writes pass through untouched.
pub struct Watched<T> {
    io: T,
    framing: Framing,
    announce: watch::Sender<Announcement>,
}

impl<T> Watched<T> {
    pub fn new(io: T, announce: watch::Sender<Announcement>) -> Self {
        Self {
            io,
            framing: Framing::default(),
            announce,
        }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Watched<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let polled = Pin::new(&mut this.io).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = polled {
            if let Some(news) = this.framing.feed(&buf.filled()[before..]) {
                // Only the newest counts; nobody listening is no fault.
                this.announce.send_replace(news);
            }
        }
        polled
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Watched<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }
}

/// One request's view of its connection's announcements.
pub struct Announced {
    pub announcements: watch::Receiver<Announcement>,
    /// Which of the connection's requests this is.
    pub request: u64,
}

impl Announced {
    /// Completes once this request's chunk sizes announce more than `limit` bytes; never
    /// otherwise (not once its body is followed past, nor once the connection is gone).
    pub async fn passes(&mut self, limit: u64) {
        loop {
            let now = *self.announcements.borrow_and_update();
            if now.request == self.request && now.bytes > limit {
                return;
            }
            if now.request > self.request || self.announcements.changed().await.is_err() {
                return std::future::pending().await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CHUNKED: &str =
        "POST /api/tf-states/net/state HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";

    /// Everything `bytes` announce, fed in pieces of `piece` bytes.
    fn announced(bytes: &str, piece: usize) -> Vec<Announcement> {
        let mut framing = Framing::default();
        bytes
            .as_bytes()
            .chunks(piece)
            .filter_map(|p| framing.feed(p))
            .collect()
    }

    fn last(bytes: &str) -> Announcement {
        let whole = announced(bytes, usize::MAX);
        for piece in [1, 2, 7] {
            assert_eq!(
                announced(bytes, piece).last(),
                whole.last(),
                "fed {piece} at a time"
            );
        }
        *whole.last().expect("an announcement")
    }

    #[test]
    fn a_chunk_size_is_announced_before_its_data() {
        let huge = last(&format!("{CHUNKED}10000000000\r\n"));
        assert_eq!(
            huge,
            Announcement {
                request: 0,
                bytes: 1 << 40
            }
        );
    }

    #[test]
    fn chunks_add_up_and_extensions_are_skipped() {
        let body = format!("{CHUNKED}5;name=value\r\nhello\r\n3 \r\nabc\r\n");
        assert_eq!(
            last(&body),
            Announcement {
                request: 0,
                bytes: 8
            }
        );
    }

    #[test]
    fn requests_are_counted_past_bodies_of_either_kind() {
        let stream = format!(
            "GET / HTTP/1.1\r\nHost: x\r\n\r\n\
             POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 14\r\n\r\nffffffffff\r\n\r\n\
             {CHUNKED}2\r\nab\r\n0\r\nX-Trailer: t\r\n\r\n\
             {CHUNKED}fff\r\n"
        );
        assert_eq!(
            last(&stream),
            Announcement {
                request: 3,
                bytes: 0xfff
            }
        );
    }

    #[test]
    fn a_size_past_u64_is_over_any_limit() {
        let huge = last(&format!("{CHUNKED}{}\r\n", "f".repeat(40)));
        assert_eq!(huge.bytes, u64::MAX);
    }

    #[test]
    fn a_stream_it_cannot_follow_is_no_longer_watched() {
        for lost in [
            "POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\nfff\r\n".to_owned(),
            "POST / HTTP/1.1\r\nContent-Length: 1, 2\r\n\r\nfff\r\n".to_owned(),
            format!("{CHUNKED}zz\r\n{CHUNKED}fff\r\n"),
            "NOT HTTP\r\n\r\n".to_owned(),
        ] {
            assert!(
                announced(&lost, usize::MAX).iter().all(|a| a.bytes < 0xfff),
                "{lost:?}"
            );
        }
    }
}
