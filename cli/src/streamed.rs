//! Sending a version's content as it is opened: a hyper body that opens the next segment
//! each time the connection can take more, so a read holds one segment of a blob version
//! (read from its file as it goes) or the sealed bytes of an inline one, never the whole
//! answer. Reading a 64 KiB segment (from the page cache, as a rule) and opening it take
//! microseconds, so it runs on the connection's task, not on a blocking thread.

use std::pin::Pin;
use std::task::{Context, Poll};

use hegemony_state::http::content::Chunks;
use hyper::body::{Body, Bytes, Frame, SizeHint};

/// The body of a streamed answer, `length` bytes long (its `Content-Length`).
pub struct Streamed {
    chunks: Option<Chunks>,
    remaining: u64,
}

impl Streamed {
    pub fn new(chunks: Chunks, length: u64) -> Self {
        Self {
            chunks: Some(chunks),
            remaining: length,
        }
    }
}

impl Body for Streamed {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
        let this = &mut *self;
        let Some(chunks) = this.chunks.as_mut() else {
            return Poll::Ready(None);
        };
        loop {
            match chunks.next_chunk() {
                // The inflater may hold a segment's output back: go on to the next.
                Ok(Some(chunk)) if chunk.is_empty() => continue,
                Ok(Some(chunk)) => {
                    this.remaining = this.remaining.saturating_sub(chunk.len() as u64);
                    return Poll::Ready(Some(Ok(Frame::data(Bytes::from(chunk)))));
                }
                Ok(None) => {
                    this.chunks = None;
                    return Poll::Ready(None);
                }
                // The headers are gone: all that is left is to cut the body short, which
                // the client sees against the Content-Length.
                Err(e) => {
                    this.chunks = None;
                    tracing::error!(error = %e, "a version's content failed to open part way through its answer; the answer was cut short");
                    return Poll::Ready(Some(Err(std::io::Error::other(e))));
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.chunks.is_none()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.remaining)
    }
}
