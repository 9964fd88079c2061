//! The bench's HTTP/1.1 client, as light as wrk: one keep-alive TCP
//! connection per worker, the request written from a buffer the worker
//! reuses, the answer read into another and parsed in place (`httparse`).
//! A general client (reqwest, hyper's pool) spends more CPU per request
//! than the gateway's whole HTTP path, which pulls every ratio of the bench
//! towards 1 and hides the difference between strategies.
//!
//! What it does not do, because the gateway never asks for it: TLS,
//! pipelining, redirects, chunked bodies (an answer without
//! `Content-Length` is an error), bodies on requests.

use std::io;
use std::net::SocketAddr;
use std::ops::Range;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Headers an answer may carry that the client looks at; more are an error.
const MAX_HEADERS: usize = 32;

/// One worker's connection to the gateway, opened on first use and again
/// after the server closed it.
pub struct Conn {
    addr: SocketAddr,
    stream: Option<TcpStream>,
    /// The answer being read; its head and body are ranges into it.
    buf: Vec<u8>,
}

/// One answer: its status, the `X-Limited-By` header of a 429, and where
/// its body lies in the connection's buffer ([`Conn::body`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    /// The HTTP status.
    pub status: u16,
    /// The layer that refused a 429 (`gateway` or `service`).
    pub limited_by: Option<String>,
    body: Range<usize>,
}

impl Conn {
    /// A connection to `addr`, not yet opened.
    pub fn new(addr: SocketAddr) -> Self {
        Self {
            addr,
            stream: None,
            buf: Vec::with_capacity(1024),
        }
    }

    /// Sends `request` (a whole HTTP/1.1 request) and reads its answer.
    /// When the request went out on a connection that had served before
    /// and the server closed it without a byte of answer (its keep-alive
    /// ran out), a `retry_on_reset` request is sent once more on a new
    /// connection; any other failure is the caller's (a buy's outcome is
    /// then unknown).
    pub async fn send(&mut self, request: &[u8], retry_on_reset: bool) -> io::Result<Reply> {
        let reused = self.stream.is_some();
        match self.exchange(request).await {
            Err(e) if reused && retry_on_reset && e.kind() == io::ErrorKind::UnexpectedEof => {
                self.exchange(request).await
            }
            other => other,
        }
    }

    /// The body of `reply`, the last answer read.
    pub fn body(&self, reply: &Reply) -> &[u8] {
        &self.buf[reply.body.clone()]
    }

    async fn exchange(&mut self, request: &[u8]) -> io::Result<Reply> {
        let result = self.try_exchange(request).await;
        if !matches!(&result, Ok((_, true))) {
            // A failed or last exchange: the next one opens a new connection.
            self.stream = None;
        }
        result.map(|(reply, _)| reply)
    }

    /// The answer, and whether the connection stays open after it.
    async fn try_exchange(&mut self, request: &[u8]) -> io::Result<(Reply, bool)> {
        let stream = match self.stream.take() {
            Some(open) => open,
            None => {
                let new = TcpStream::connect(self.addr).await?;
                new.set_nodelay(true)?;
                new
            }
        };
        let stream = self.stream.insert(stream);
        stream.write_all(request).await?;
        self.buf.clear();
        loop {
            if let Some(head) = parse_head(&self.buf)? {
                let end = head.body_at + head.length;
                while self.buf.len() < end {
                    read_more(stream, &mut self.buf).await?;
                }
                let reply = Reply {
                    status: head.status,
                    limited_by: head.limited_by,
                    body: head.body_at..end,
                };
                return Ok((reply, head.keep_alive));
            }
            read_more(stream, &mut self.buf).await?;
        }
    }
}

/// Reads what has arrived onto the end of `buf`; the peer closing is
/// `UnexpectedEof`.
async fn read_more(stream: &mut TcpStream, buf: &mut Vec<u8>) -> io::Result<()> {
    buf.reserve(1024);
    if stream.read_buf(buf).await? == 0 {
        return Err(io::ErrorKind::UnexpectedEof.into());
    }
    Ok(())
}

/// An answer's head, once whole.
struct Head {
    status: u16,
    limited_by: Option<String>,
    keep_alive: bool,
    body_at: usize,
    length: usize,
}

/// The head at the start of `buf`, or `None` until all of it has arrived.
fn parse_head(buf: &[u8]) -> io::Result<Option<Head>> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut response = httparse::Response::new(&mut headers);
    let body_at = match response.parse(buf) {
        Ok(httparse::Status::Complete(at)) => at,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(e) => return Err(io::Error::new(io::ErrorKind::InvalidData, e)),
    };
    let mut head = Head {
        status: response.code.unwrap_or(0),
        limited_by: None,
        keep_alive: response.version == Some(1),
        body_at,
        length: usize::MAX,
    };
    for header in response.headers.iter() {
        let value = std::str::from_utf8(header.value).unwrap_or("");
        if header.name.eq_ignore_ascii_case("content-length") {
            head.length = value.trim().parse().unwrap_or(usize::MAX);
        } else if header.name.eq_ignore_ascii_case("connection") {
            head.keep_alive = !value.eq_ignore_ascii_case("close");
        } else if header
            .name
            .eq_ignore_ascii_case(crate::model::error::LIMITED_BY)
        {
            head.limited_by = Some(value.to_owned());
        }
    }
    if head.length == usize::MAX {
        let missing = "an answer without Content-Length";
        return Err(io::Error::new(io::ErrorKind::Unsupported, missing));
    }
    Ok(Some(head))
}

/// The `host:port` of a base URL (`http://host:port`): what a request's
/// `Host` names and what [`resolve`] looks up.
pub fn authority(base: &str) -> &str {
    base.trim_start_matches("http://").trim_end_matches('/')
}

/// The gateway's address from its base URL (`http://host:port`).
pub async fn resolve(base: &str) -> anyhow::Result<SocketAddr> {
    anyhow::ensure!(base.starts_with("http://"), "not an http:// URL: {base}");
    let authority = authority(base);
    tokio::net::lookup_host(authority)
        .await?
        .next()
        .ok_or_else(|| anyhow::anyhow!("{authority} resolves to nothing"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_head_is_read_once_whole() {
        let answer = b"HTTP/1.1 429 Too Many Requests\r\nContent-Length: 2\r\n\
                       X-Limited-By: gateway\r\n\r\n{}";
        assert!(parse_head(&answer[..20]).unwrap().is_none());
        let head = parse_head(answer).unwrap().unwrap();
        assert_eq!(head.status, 429);
        assert_eq!(head.limited_by.as_deref(), Some("gateway"));
        assert_eq!(head.body_at + head.length, answer.len());
        assert!(head.keep_alive);
    }

    #[test]
    fn a_closing_or_unsized_answer_says_so() {
        let closing = b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n";
        assert!(!parse_head(closing).unwrap().unwrap().keep_alive);
        let chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
        let error = parse_head(chunked).err().expect("an error");
        assert_eq!(error.kind(), io::ErrorKind::Unsupported);
    }
}
