//! Answering with a version's content. A format-2 version is kept as a gzip member, so a
//! client that accepts gzip gets the decrypted segments as they are (no decompression, no
//! recompression), and one that does not gets them inflated as they go. The local server
//! marks the requests it can stream ([`Streams`]) and sends such a body segment by segment
//! ([`StreamedBody`]); a Lambda function, which returns one payload, gets the body gathered:
//! the gzip member in the sealed object's own buffer, the plaintext in one buffer of its size.

use std::sync::{Arc, Mutex};

use lambda_http::http::{header, StatusCode};
use lambda_http::{Body, Request, Response};

use super::error::HttpError;
use super::response::{accepts_gzip, content_response};
use crate::crypto::{self, EnvelopeError, Inflating, Opening};
use crate::service::state::Content;
use crate::service::Error;

/// A request extension the local server sets: it sends a [`StreamedBody`] as it comes.
#[derive(Debug, Clone, Copy)]
pub struct Streams;

/// A body still to be opened, carried in a response's extensions (whose body is then empty
/// and whose `Content-Length` says how long it will be). Extensions must be `Clone`; the
/// body is taken once, by whoever sends it.
#[derive(Clone)]
pub struct StreamedBody(Arc<Mutex<Option<Chunks>>>);

impl StreamedBody {
    /// The chunks, to the first caller only.
    pub fn take(&self) -> Option<Chunks> {
        // A poisoned lock means a panic while taking, which leaves nothing to send.
        self.0.lock().ok().and_then(|mut chunks| chunks.take())
    }
}

/// A version's content, a piece at a time.
pub enum Chunks {
    /// The gzip member, one opened segment at a time.
    Gzip(Box<Opening>),
    /// The plaintext, inflated a segment's worth at a time.
    Plain(Box<Inflating>),
}

impl Chunks {
    /// The next piece; `None` at the end.
    ///
    /// # Errors
    /// When a segment does not authenticate or its content does not inflate: the body
    /// stops there, short of its `Content-Length`, which the client sees as a cut transfer.
    pub fn next_chunk(&mut self) -> Result<Option<Vec<u8>>, EnvelopeError> {
        match self {
            Chunks::Gzip(opening) => Ok(opening.next_segment()?.map(<[u8]>::to_vec)),
            Chunks::Plain(inflating) => inflating.next_chunk(),
        }
    }
}

/// A 200 with `content`, gzip-encoded when the request accepts it.
///
/// # Errors
/// `Damaged` when a format-2 version is gathered (not streamed) and a segment does not
/// authenticate or inflate.
pub fn answer(content: Content, req: &Request) -> Result<Response<Body>, HttpError> {
    let gzip = accepts_gzip(req.headers());
    let (opening, size) = match content {
        Content::Whole(bytes) => return Ok(content_response(bytes, gzip)),
        Content::Gzip { opening, size } => (opening, size),
    };
    let builder = Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "application/json")
        .header(header::VARY, "Accept-Encoding");
    let builder = if gzip {
        builder.header(header::CONTENT_ENCODING, "gzip")
    } else {
        builder
    };
    let damaged = |e: EnvelopeError| HttpError::Service(Error::Damaged(e.to_string()));
    if req.extensions().get::<Streams>().is_none() {
        let bytes = if gzip {
            opening.into_opened()
        } else {
            crypto::open_into(*opening, size as usize, Vec::new())
        };
        return Ok(builder
            .body(Body::Binary(bytes.map_err(damaged)?))
            .expect("static headers are valid"));
    }
    let (length, chunks) = if gzip {
        (opening.opened_len(), Chunks::Gzip(opening))
    } else {
        let inflating = Inflating::new(*opening).map_err(damaged)?;
        (size, Chunks::Plain(Box::new(inflating)))
    };
    let mut response = builder
        .header(header::CONTENT_LENGTH, length)
        .body(Body::Empty)
        .expect("static headers are valid");
    response
        .extensions_mut()
        .insert(StreamedBody(Arc::new(Mutex::new(Some(chunks)))));
    Ok(response)
}
