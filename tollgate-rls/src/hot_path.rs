//! `ShouldRateLimit` without tonic's router and codec: the one call Envoy makes per
//! request is answered by hand, and every other gRPC call (health, unknown methods,
//! compressed requests) goes on to tonic's routes unchanged.
//!
//! tonic's generic path (the router, the streaming decoder, the encoding body) costs
//! about a sixth of the service's CPU per call; this one reads one message, decodes
//! it, asks the [`Engine`] and writes one message and its trailers. It sits inside
//! tonic's server as a layer, so connections, HTTP/2 settings, `grpc-timeout` and
//! graceful shutdown are tonic's as before. Errors are the ones tonic gives for the
//! same input, word for word.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::{Buf, BufMut, Bytes, BytesMut};
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use http::header::{CONTENT_TYPE, HeaderMap, HeaderValue};
use http_body::Frame;
use http_body_util::BodyExt as _;
use prost::Message as _;
use tonic::Status;
use tonic::body::Body;

use crate::engine::Engine;

/// The gRPC path of `ShouldRateLimit`.
pub const SHOULD_RATE_LIMIT: &str = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit";

/// The largest request message read, as tonic's default: 4 MiB.
pub const MAX_MESSAGE: usize = 4 * 1024 * 1024;

/// A gRPC message's prefix: the compressed flag and the length.
const PREFIX: usize = 5;

/// Puts the hot path in front of a tonic server's routes.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use tollgate::time::ManualClock;
/// use tollgate_rls::backend::{Backend, BackendOptions};
/// use tollgate_rls::domains::Domains;
/// use tollgate_rls::engine::Engine;
/// use tollgate_rls::hot_path::HotPathLayer;
///
/// let backend = Backend::memory_with_clock(&BackendOptions::memory(), ManualClock::new())?;
/// let engine = Arc::new(Engine::with_backend(Domains::default(), backend));
/// let server = tonic::transport::Server::builder().layer(HotPathLayer::new(engine));
/// # drop(server);
/// # Ok::<(), tollgate::store::StoreError>(())
/// ```
#[derive(Debug, Clone)]
pub struct HotPathLayer {
    engine: Arc<Engine>,
}

impl HotPathLayer {
    /// The layer, answering from `engine`.
    pub fn new(engine: Arc<Engine>) -> HotPathLayer {
        HotPathLayer { engine }
    }
}

impl<S> tower_layer::Layer<S> for HotPathLayer {
    type Service = HotPath<S>;

    fn layer(&self, routes: S) -> HotPath<S> {
        HotPath {
            engine: self.engine.clone(),
            routes,
        }
    }
}

/// The service of [`HotPathLayer`]: `ShouldRateLimit` by hand, the rest to `S`.
#[derive(Debug, Clone)]
pub struct HotPath<S> {
    engine: Arc<Engine>,
    routes: S,
}

type Answer = Pin<Box<dyn Future<Output = Result<http::Response<Body>, Infallible>> + Send>>;

impl<S> tower_service::Service<http::Request<Body>> for HotPath<S>
where
    S: tower_service::Service<
            http::Request<Body>,
            Response = http::Response<Body>,
            Error = Infallible,
        > + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
{
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = Answer;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.routes.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<Body>) -> Answer {
        if !is_plain_should_rate_limit(&request) {
            // The clone takes over the readiness `poll_ready` found, as tower asks.
            let clone = self.routes.clone();
            let mut routes = std::mem::replace(&mut self.routes, clone);
            return Box::pin(async move { routes.call(request).await });
        }
        let engine = self.engine.clone();
        Box::pin(async move {
            Ok(
                match should_rate_limit(&engine, request.into_body()).await {
                    Ok(response) => ok_response(&response),
                    Err(status) => status.into_http(),
                },
            )
        })
    }
}

/// `ShouldRateLimit` with an uncompressed message: what the hot path answers.
fn is_plain_should_rate_limit(request: &http::Request<Body>) -> bool {
    request.uri().path() == SHOULD_RATE_LIMIT
        && request
            .headers()
            .get("grpc-encoding")
            .is_none_or(|e| e == "identity")
}

async fn should_rate_limit(engine: &Engine, body: Body) -> Result<RateLimitResponse, Status> {
    let message = read_message(body).await?;
    let request = RateLimitRequest::decode(message).map_err(|e| Status::internal(e.to_string()))?;
    crate::grpc::answer(engine, &request).await
}

/// The request's first message, read as far as it goes (a unary call has one; what
/// follows it is not read, as tonic does not).
///
/// # Errors
///
/// tonic's status for the same body: no message, a message cut short, a compressed
/// flag without `grpc-encoding`, an invalid flag, a message above [`MAX_MESSAGE`], or
/// the stream's own error.
pub async fn read_message(mut body: Body) -> Result<Bytes, Status> {
    let mut buf = BytesMut::new();
    let mut wanted: Option<usize> = None;
    loop {
        if wanted.is_none() && buf.len() >= PREFIX {
            wanted = Some(PREFIX + message_length(&buf[..PREFIX])?);
        }
        if let Some(wanted) = wanted.filter(|&w| buf.len() >= w) {
            buf.truncate(wanted);
            let mut message = buf.freeze();
            message.advance(PREFIX);
            return Ok(message);
        }
        match body.frame().await {
            Some(Ok(frame)) => {
                if let Ok(data) = frame.into_data() {
                    if buf.is_empty() && data.len() >= PREFIX {
                        // The usual case: one frame holds the whole message.
                        let length = PREFIX + message_length(&data[..PREFIX])?;
                        if data.len() >= length {
                            return Ok(data.slice(PREFIX..length));
                        }
                    }
                    buf.extend_from_slice(&data);
                }
            }
            Some(Err(e)) => return Err(Status::from_error(e.into())),
            None if buf.is_empty() => return Err(Status::internal("Missing request message.")),
            None => return Err(Status::internal("Unexpected EOF decoding stream.")),
        }
    }
}

/// The length a message's prefix gives, checked as tonic checks it.
fn message_length(prefix: &[u8]) -> Result<usize, Status> {
    match prefix[0] {
        0 => {}
        1 => {
            return Err(Status::internal(
                "protocol error: received message with compressed-flag but no grpc-encoding was specified",
            ));
        }
        f => {
            return Err(Status::internal(format!(
                "protocol error: received message with invalid compression flag: {f} (valid flags are 0 and 1), while sending request"
            )));
        }
    }
    let length = u32::from_be_bytes([prefix[1], prefix[2], prefix[3], prefix[4]]) as usize;
    if length > MAX_MESSAGE {
        return Err(Status::out_of_range(format!(
            "Error, decoded message length too large: found {length} bytes, the limit is: {MAX_MESSAGE} bytes"
        )));
    }
    Ok(length)
}

/// `200`, the answer as one gRPC message, and `grpc-status: 0` in the trailers.
fn ok_response(answer: &RateLimitResponse) -> http::Response<Body> {
    let length = answer.encoded_len();
    let mut message = BytesMut::with_capacity(PREFIX + length);
    message.put_u8(0);
    // A response far below 4 GiB: its descriptors are the request's.
    message.put_u32(u32::try_from(length).unwrap_or(u32::MAX));
    answer.encode_raw(&mut message);
    let mut response = http::Response::new(Body::new(Unary {
        message: Some(message.freeze()),
        trailers: true,
    }));
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/grpc"));
    response
}

/// One message, then the trailers of success.
struct Unary {
    message: Option<Bytes>,
    trailers: bool,
}

impl http_body::Body for Unary {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        if let Some(message) = self.message.take() {
            return Poll::Ready(Some(Ok(Frame::data(message))));
        }
        if std::mem::take(&mut self.trailers) {
            let mut trailers = HeaderMap::with_capacity(1);
            trailers.insert("grpc-status", HeaderValue::from_static("0"));
            return Poll::Ready(Some(Ok(Frame::trailers(trailers))));
        }
        Poll::Ready(None)
    }

    fn is_end_stream(&self) -> bool {
        self.message.is_none() && !self.trailers
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(chunks: &[&[u8]]) -> Body {
        let chunks: Vec<Result<Frame<Bytes>, Infallible>> = chunks
            .iter()
            .map(|c| Ok(Frame::data(Bytes::copy_from_slice(c))))
            .collect();
        Body::new(http_body_util::StreamBody::new(futures_util::stream::iter(
            chunks,
        )))
    }

    fn framed(message: &[u8]) -> Vec<u8> {
        let mut out = vec![0];
        out.extend_from_slice(&(message.len() as u32).to_be_bytes());
        out.extend_from_slice(message);
        out
    }

    async fn read(chunks: &[&[u8]]) -> Result<Bytes, Status> {
        read_message(body(chunks)).await
    }

    #[tokio::test]
    async fn a_message_in_one_frame_or_in_pieces() {
        let whole = framed(b"hello");
        assert_eq!(read(&[&whole]).await.unwrap(), &b"hello"[..]);
        let (a, b) = whole.split_at(3);
        assert_eq!(read(&[a, b]).await.unwrap(), &b"hello"[..]);
        let pieces: Vec<&[u8]> = whole.chunks(1).collect();
        assert_eq!(read(&pieces).await.unwrap(), &b"hello"[..]);
        assert_eq!(read(&[&framed(b"")]).await.unwrap(), &b""[..]);
    }

    #[tokio::test]
    async fn what_follows_the_first_message_is_not_read() {
        let mut two = framed(b"first");
        two.extend_from_slice(&framed(b"second"));
        assert_eq!(read(&[&two]).await.unwrap(), &b"first"[..]);
    }

    #[tokio::test]
    async fn bad_bodies_get_tonics_statuses() {
        let status = read(&[]).await.unwrap_err();
        assert_eq!(status.code(), tonic::Code::Internal);
        assert_eq!(status.message(), "Missing request message.");

        let status = read(&[&framed(b"hello")[..7]]).await.unwrap_err();
        assert_eq!(status.message(), "Unexpected EOF decoding stream.");
        let status = read(&[&[0, 0]]).await.unwrap_err();
        assert_eq!(status.message(), "Unexpected EOF decoding stream.");

        let mut compressed = framed(b"hello");
        compressed[0] = 1;
        let status = read(&[&compressed]).await.unwrap_err();
        assert_eq!(status.code(), tonic::Code::Internal);
        assert!(status.message().contains("compressed-flag"), "{status:?}");

        compressed[0] = 7;
        let status = read(&[&compressed]).await.unwrap_err();
        assert!(status.message().contains("invalid compression flag: 7"));

        let huge = [0, 0xff, 0xff, 0xff, 0xff];
        let status = read(&[&huge]).await.unwrap_err();
        assert_eq!(status.code(), tonic::Code::OutOfRange);
        assert!(status.message().contains("4294967295 bytes"), "{status:?}");
    }

    #[tokio::test]
    async fn the_answer_is_one_message_then_status_zero() {
        let answer = RateLimitResponse {
            overall_code: 1,
            ..Default::default()
        };
        let response = ok_response(&answer);
        assert_eq!(response.headers()[CONTENT_TYPE], "application/grpc");
        let collected = response.into_body().collect().await.unwrap();
        let trailers = collected.trailers().cloned().unwrap();
        assert_eq!(trailers["grpc-status"], "0");
        let bytes = collected.to_bytes();
        assert_eq!(bytes[0], 0);
        let decoded = RateLimitResponse::decode(&bytes[PREFIX..]).unwrap();
        assert_eq!(decoded, answer);
        assert_eq!(bytes.len(), PREFIX + answer.encoded_len());
    }
}
