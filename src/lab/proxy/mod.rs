//! A TCP fault proxy: the nemesis's hand on one network link.
//!
//! The kernel here has no netem, so faults between an instance and a
//! backend (Redis, PostgreSQL, ZooKeeper) are made by putting a [`Proxy`]
//! on the link: the instance is given the proxy's address instead of the
//! backend's and never knows. A scenario owns the lab in-process, so it
//! flips a link with [`Proxy::set`] on the handle the lab keeps; the
//! instances are separate processes but need no control plane, since they
//! only see the consequences on their sockets.
//!
//! What each [`Mode`] looks like to a client is what makes it useful:
//! `Blackhole` is a partition (requests time out, nothing errors), `Cut` is
//! a reset (every call fails at once).

use std::collections::VecDeque;
use std::io;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::Context;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{ReadHalf, WriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::{JoinHandle, JoinSet};

use timer::Timer;

mod timer;

/// What the proxy does with the traffic of every connection, current and
/// new.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Forward bytes both ways.
    Pass,
    /// A partition: connections stay open and new ones are accepted, but
    /// nothing is delivered either way, so clients see timeouts, never
    /// errors. Bytes already read are held, and the rest waits unread in
    /// the kernel's buffers.
    ///
    /// Back to [`Mode::Pass`], held bytes are delivered, late: what TCP's
    /// retransmissions do after a partition shorter than their timeout,
    /// and the "delayed packet" of the fencing argument (a write that
    /// arrives after its sender's lease has expired). Connections accepted
    /// during the partition reach the backend then, with what their
    /// clients sent meanwhile. For a partition long enough that TCP gave
    /// up, go through [`Mode::Cut`] first: `Blackhole`, `Cut`, `Pass`.
    Blackhole,
    /// Every current connection is reset (RST to both the client and the
    /// backend, through `SO_LINGER` 0) and every new one is reset as soon
    /// as it is accepted: a crashed peer or a firewall's reject. Clients
    /// fail at once and reconnect once the mode is back to `Pass`.
    Cut,
    /// Forward bytes both ways, each chunk `d` after it was read: a
    /// request and its reply take `2d` longer, however many are in
    /// flight (a slow network, or the round trip of a backend farther
    /// away). Chunks keep their order; what is in flight when the mode
    /// changes is written when its new delay says.
    Delay(Duration),
}

impl Mode {
    /// How long a chunk waits in the proxy.
    fn delay(self) -> Duration {
        match self {
            Self::Delay(d) => d,
            _ => Duration::ZERO,
        }
    }
}

/// A running proxy from a free loopback port to one upstream address.
/// Each accepted connection gets its own connection to the upstream; if
/// the upstream refuses it (the backend is down), the client's connection
/// is reset, so a dead backend still looks dead through the proxy.
/// Dropping the proxy, or [`Proxy::stop`], closes every connection it
/// carries.
pub struct Proxy {
    /// Where clients connect instead of the upstream.
    addr: SocketAddr,
    /// Where connections are forwarded, for the log.
    upstream: SocketAddr,
    /// The current mode. Every connection watches it, so a change applies
    /// to connections already open, not only to new ones; dropping it
    /// tells the accept loop to stop.
    mode: watch::Sender<Mode>,
    /// The accept loop, which owns the connections' tasks.
    task: JoinHandle<()>,
}

impl Proxy {
    /// Listens on a free loopback port (the OS picks it: no window for
    /// another program to take it) and forwards to `upstream` in
    /// [`Mode::Pass`].
    pub async fn start(upstream: SocketAddr) -> anyhow::Result<Self> {
        let listener = TcpListener::bind(("127.0.0.1", 0))
            .await
            .context("binding the proxy's port")?;
        let addr = listener.local_addr()?;
        let (mode, watcher) = watch::channel(Mode::Pass);
        let task = tokio::spawn(accept(listener, upstream, watcher));
        Ok(Self {
            addr,
            upstream,
            mode,
            task,
        })
    }

    /// The address to give clients instead of the upstream's.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Switches the mode, for current connections and new ones alike.
    pub fn set(&self, mode: Mode) {
        tracing::info!(proxy = %self.addr, upstream = %self.upstream, ?mode, "proxy mode");
        self.mode.send_replace(mode);
    }

    /// Stops accepting and closes every connection (politely: FIN, not
    /// RST); returns once they are all closed.
    pub async fn stop(self) {
        let Self { mode, task, .. } = self;
        drop(mode);
        let _ = task.await;
    }
}

/// Accepts until the [`Proxy`] is gone, each connection in its own task;
/// then closes them all.
async fn accept(listener: TcpListener, upstream: SocketAddr, mut mode: watch::Receiver<Mode>) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((client, _)) => {
                    connections.spawn(relay(client, upstream, mode.clone()));
                }
                Err(error) => {
                    // Out of file descriptors, most likely: wait for some
                    // connections to close rather than spin.
                    tracing::warn!(%error, "proxy accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                }
            },
            // Reap finished connections so the set does not grow.
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
            changed = mode.changed() => if changed.is_err() {
                break;
            },
        }
    }
    connections.shutdown().await;
}

/// One client connection: forwards it until either side closes it, and
/// resets both sides when the mode turns to [`Mode::Cut`] or when one side
/// resets (so a reset passes through, as it would without the proxy).
async fn relay(mut client: TcpStream, upstream: SocketAddr, mut mode: watch::Receiver<Mode>) {
    let mut server = None;
    let copy_mode = mode.clone();
    let reset = tokio::select! {
        // The cut first: not one more chunk once it is decided.
        biased;
        cut = mode.wait_for(|m| *m == Mode::Cut) => cut.is_ok(),
        forwarded = forward(&mut client, &mut server, upstream, copy_mode) => forwarded.is_err(),
    };
    if reset {
        // SO_LINGER 0: closing sends RST instead of FIN. Best effort: the
        // socket is being dropped either way.
        let _ = client.set_zero_linger();
        if let Some(server) = &server {
            let _ = server.set_zero_linger();
        }
    }
}

/// Connects to the upstream once the link is not blackholed (a partition
/// lets nothing through, not even a handshake), then copies both ways,
/// pausing while the link is blackholed. `server` is filled in so that
/// [`relay`] can reset it.
///
/// Not `tokio::io::copy_bidirectional`: a partition has to stop the copy in
/// the middle, and the bytes in its buffers would be lost with it. Here
/// they live in [`Pipe`]s outside the copying future, which a mode change
/// cancels and a healed partition starts again. In `Pass` the cost over a
/// plain copy is one more future polled per wake-up (the mode's).
async fn forward(
    client: &mut TcpStream,
    server: &mut Option<TcpStream>,
    upstream: SocketAddr,
    mut mode: watch::Receiver<Mode>,
) -> io::Result<()> {
    flowing(&mut mode).await?;
    let server = server.insert(TcpStream::connect(upstream).await?);
    // Small requests and replies (Redis commands) must not wait for Nagle.
    client.set_nodelay(true)?;
    server.set_nodelay(true)?;
    let (mut client_read, mut client_write) = client.split();
    let (mut server_read, mut server_write) = server.split();
    let (mut requests, mut replies) = (Pipe::new(), Pipe::new());
    loop {
        let delay = mode.borrow().delay();
        tokio::select! {
            copied = async {
                tokio::try_join!(
                    requests.copy(&mut client_read, &mut server_write, delay),
                    replies.copy(&mut server_read, &mut client_write, delay),
                )
            } => {
                copied?;
                return Ok(());
            }
            changed = mode.changed() => changed.map_err(|_| stopped())?,
        }
        flowing(&mut mode).await?;
    }
}

/// One direction of a connection: the chunks read from one side and not
/// yet written to the other, each with when it was read. Kept here,
/// outside the copying future, so that cancelling the copy loses nothing.
struct Pipe {
    /// What was read and not written yet, oldest first.
    chunks: VecDeque<Chunk>,
    /// Bytes in `chunks`: reading stops above [`HELD_MAX`].
    held: usize,
    /// The end of the stream has been read.
    ended: bool,
    /// ... and passed on (a half-close).
    closed: bool,
    /// Where a read lands before it becomes a chunk.
    scratch: Box<[u8]>,
    /// Holds each chunk until it is due.
    timer: Timer,
}

/// Bytes read and held for a delayed write, at most, per direction.
const HELD_MAX: usize = 1 << 20;

/// Bytes read at once, and when.
struct Chunk {
    read_at: Instant,
    bytes: Vec<u8>,
    /// How many of them are written already.
    written: usize,
}

impl Pipe {
    fn new() -> Self {
        Self {
            chunks: VecDeque::new(),
            held: 0,
            ended: false,
            closed: false,
            scratch: vec![0; 16 * 1024].into_boxed_slice(),
            timer: Timer::default(),
        }
    }

    /// Copies until the end of the stream, which it passes on as a
    /// half-close, writing each chunk `delay` after it was read while
    /// reading on (a delay line: the link is slower, not narrower).
    /// Cancel-safe: each await is one read, one write or a sleep, and what
    /// a read or a write did is recorded in `self` before the next.
    async fn copy(
        &mut self,
        from: &mut ReadHalf<'_>,
        to: &mut WriteHalf<'_>,
        delay: Duration,
    ) -> io::Result<()> {
        loop {
            let due = self.chunks.front().map(|c| c.read_at + delay);
            if due.is_none() && self.ended {
                if !self.closed {
                    to.shutdown().await?;
                    self.closed = true;
                }
                return Ok(());
            }
            let reading = !self.ended && self.held < HELD_MAX;
            tokio::select! {
                biased;
                due = Self::until(&mut self.timer, due), if due.is_some() => {
                    due?;
                    self.write_front(to).await?;
                }
                read = from.read(&mut self.scratch), if reading => match read? {
                    0 => self.ended = true,
                    n => {
                        self.held += n;
                        self.chunks.push_back(Chunk {
                            read_at: Instant::now(),
                            bytes: self.scratch[..n].to_vec(),
                            written: 0,
                        });
                    }
                },
            }
        }
    }

    /// Waits until `due` (returns at once without one, or past it: in
    /// `Pass` every chunk is due when read, and goes straight on).
    async fn until(timer: &mut Timer, due: Option<Instant>) -> io::Result<()> {
        match due {
            Some(due) => timer.until(due).await,
            None => Ok(()),
        }
    }

    /// One write of the oldest chunk.
    async fn write_front(&mut self, to: &mut WriteHalf<'_>) -> io::Result<()> {
        let Some(chunk) = self.chunks.front_mut() else {
            return Ok(());
        };
        let written = to.write(&chunk.bytes[chunk.written..]).await?;
        if written == 0 {
            return Err(io::ErrorKind::WriteZero.into());
        }
        chunk.written += written;
        if chunk.written == chunk.bytes.len() {
            self.held -= chunk.bytes.len();
            self.chunks.pop_front();
        }
        Ok(())
    }
}

/// Waits while the link is blackholed.
async fn flowing(mode: &mut watch::Receiver<Mode>) -> io::Result<()> {
    mode.wait_for(|m| *m != Mode::Blackhole)
        .await
        .map(|_| ())
        .map_err(|_| stopped())
}

/// The [`Proxy`] is gone: its connections end.
fn stopped() -> io::Error {
    io::Error::other("proxy stopped")
}

#[cfg(test)]
mod tests {
    //! Against a real redis-server, started the way the lab starts it.

    use std::time::{Duration, Instant};

    use redis::AsyncConnectionConfig;
    use redis::aio::MultiplexedConnection;

    use super::*;
    use crate::lab::durability::Durability;
    use crate::lab::process::Managed;
    use crate::lab::{free_port, redis as server};

    /// Long enough for a PING on loopback, short enough to keep the test
    /// fast.
    const TIMEOUT: Duration = Duration::from_millis(300);

    async fn redis_server(dir: &std::path::Path) -> (Managed, SocketAddr) {
        let port = free_port().expect("a free port");
        let process =
            server::start(dir, "redis", port, Durability::Fast).expect("redis-server starts");
        let url = format!("redis://127.0.0.1:{port}");
        let started = Instant::now();
        while !server::ready(&url).await {
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "redis-server not ready"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        (process, SocketAddr::from(([127, 0, 0, 1], port)))
    }

    async fn connect(proxy: &Proxy) -> redis::RedisResult<MultiplexedConnection> {
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(TIMEOUT))
            .set_response_timeout(Some(TIMEOUT));
        redis::Client::open(format!("redis://{}", proxy.addr()))?
            .get_multiplexed_async_connection_with_config(&config)
            .await
    }

    async fn ping(conn: &mut MultiplexedConnection) -> redis::RedisResult<String> {
        redis::cmd("PING").query_async(conn).await
    }

    /// A new connection's first PING (redis-rs sends `CLIENT SETINFO` while
    /// connecting, so a failure may come from either step).
    async fn connect_and_ping(proxy: &Proxy) -> redis::RedisResult<String> {
        ping(&mut connect(proxy).await?).await
    }

    /// What a Redis client sees in each mode, on an open connection and on
    /// a new one.
    #[tokio::test]
    async fn a_redis_client_sees_timeouts_then_errors_then_service() {
        let dir = tempfile::tempdir().expect("temp dir");
        let (redis, upstream) = redis_server(dir.path()).await;
        let proxy = Proxy::start(upstream).await.expect("proxy starts");

        let mut open = connect(&proxy).await.expect("connects in Pass");
        assert_eq!(ping(&mut open).await.expect("PING in Pass"), "PONG");

        proxy.set(Mode::Blackhole);
        let error = ping(&mut open).await.expect_err("no reply in Blackhole");
        assert!(error.is_timeout(), "a partition is a timeout: {error:?}");
        let error = connect_and_ping(&proxy)
            .await
            .expect_err("silence in Blackhole");
        assert!(error.is_timeout(), "a partition is a timeout: {error:?}");

        proxy.set(Mode::Cut);
        let started = Instant::now();
        let error = ping(&mut open).await.expect_err("reset in Cut");
        assert!(!error.is_timeout(), "a cut is an error: {error:?}");
        let error = connect_and_ping(&proxy).await.expect_err("reset in Cut");
        assert!(!error.is_timeout(), "a cut is an error: {error:?}");
        assert!(started.elapsed() < TIMEOUT, "a cut fails at once");

        proxy.set(Mode::Pass);
        let mut new = connect(&proxy).await.expect("connects in Pass again");
        assert_eq!(ping(&mut new).await.expect("PING in Pass again"), "PONG");

        proxy.stop().await;
        redis.stop(Duration::from_secs(5)).await;
    }

    /// A delayed link adds its delay to each round trip both ways, and
    /// is a delay line, not a queue: a hundred requests in flight at once
    /// come back together, one round trip later, not one after another.
    #[tokio::test]
    async fn a_delayed_link_is_slower_not_narrower() {
        const DELAY: Duration = Duration::from_millis(100);
        let dir = tempfile::tempdir().expect("temp dir");
        let (redis, upstream) = redis_server(dir.path()).await;
        let proxy = Proxy::start(upstream).await.expect("proxy starts");
        proxy.set(Mode::Delay(DELAY));
        let config = AsyncConnectionConfig::new().set_response_timeout(Some(DELAY * 20));
        let client = redis::Client::open(format!("redis://{}", proxy.addr())).expect("url");
        let mut slow = client
            .get_multiplexed_async_connection_with_config(&config)
            .await
            .expect("connects through the delay");
        let started = Instant::now();
        assert_eq!(ping(&mut slow).await.expect("PING"), "PONG");
        let one = started.elapsed();
        assert!(
            one >= DELAY * 2,
            "a round trip takes 2 × the delay: {one:?}"
        );
        let started = Instant::now();
        let pings = (0..100).map(|_| {
            let mut conn = slow.clone();
            async move { ping(&mut conn).await }
        });
        for pong in futures::future::join_all(pings).await {
            assert_eq!(pong.expect("PING"), "PONG");
        }
        let hundred = started.elapsed();
        // One after another, they would take 100 round trips (20 s).
        assert!(
            hundred < DELAY * 20,
            "100 in flight take about one round trip: {hundred:?}"
        );
        proxy.stop().await;
        redis.stop(Duration::from_secs(5)).await;
    }

    /// A partition holds bytes and delivers them when it heals; a cut
    /// resets. Raw TCP, to see exactly what arrives.
    #[tokio::test]
    async fn a_healed_partition_delivers_late_and_a_cut_resets() {
        let dir = tempfile::tempdir().expect("temp dir");
        let (redis, upstream) = redis_server(dir.path()).await;
        let proxy = Proxy::start(upstream).await.expect("proxy starts");
        let mut stream = TcpStream::connect(proxy.addr()).await.expect("connects");
        let mut reply = [0; 64];

        proxy.set(Mode::Blackhole);
        stream
            .write_all(b"PING\r\n")
            .await
            .expect("the write succeeds");
        let read = tokio::time::timeout(TIMEOUT, stream.read(&mut reply)).await;
        assert!(read.is_err(), "nothing comes back in Blackhole: {read:?}");

        proxy.set(Mode::Pass);
        let read = tokio::time::timeout(TIMEOUT, stream.read(&mut reply))
            .await
            .expect("the held PING is delivered once healed")
            .expect("read");
        assert_eq!(&reply[..read], b"+PONG\r\n");

        proxy.set(Mode::Cut);
        let read = tokio::time::timeout(TIMEOUT, stream.read(&mut reply))
            .await
            .expect("a cut is immediate");
        let error = read.expect_err("a cut is a reset, not an end of stream");
        assert_eq!(error.kind(), io::ErrorKind::ConnectionReset);

        proxy.stop().await;
        redis.stop(Duration::from_secs(5)).await;
    }
}
