//! The bound on open connections, and which connection makes room when a new one arrives at it.
//!
//! The in-flight bound alone does not bound memory: a request is counted only once hookd has
//! read it, and a client opening connections faster than an overloaded hookd reads them (an
//! open-loop load generator does) would leave any number of connections waiting to be read,
//! about 50 KiB each. So [`ConnectionLimit`] holds at most its limit open.
//!
//! At the limit, a newcomer is not left waiting behind connections that do nothing: client
//! pools keep idle keep-alive connections for a minute or more, and a pool a little larger
//! than the limit (or a few clients' pools together) would have its new connections wait in
//! the kernel's accept queue until the header timeout closed an idle one, while the requests
//! on them went unanswered. Instead, as nginx does with its keep-alive connections, the
//! newcomer is taken and one open connection is asked to close, in this order:
//! - one idle for a while ([`QUIET`]), the longest idle first: it closes at once, and its
//!   client, whose pool reuses its most recently used connections, is not about to send on it;
//! - one busy with a request, the longest busy first, then one idle a moment: it closes after
//!   its next answer, which says so (`connection: close`). Closing it at once could catch its
//!   client sending the next request, which would then be lost to it.
//!
//! One connection at a time is taken past the limit this way; the others wait in the kernel's
//! accept queue.

use std::collections::HashMap;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::serve::Listener;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};

/// A listener that holds at most `limit` connections open; a connection arriving at the limit
/// is served in the place of one asked to close (see the module docs).
pub struct ConnectionLimit<L> {
    listener: L,
    limit: u32,
    slots: Arc<Semaphore>,
    open: Arc<Open>,
}

impl<L: Listener> ConnectionLimit<L> {
    pub fn new(listener: L, limit: usize) -> Self {
        let limit = u32::try_from(limit.max(1)).unwrap_or(u32::MAX);
        Self {
            listener,
            limit,
            slots: Arc::new(Semaphore::new(limit as usize)),
            open: Arc::new(Open::default()),
        }
    }

    /// Stops accepting, asks every open connection to close (idle ones close at once, the
    /// others after their answers), and returns once all have.
    pub(crate) async fn close_all(self) {
        drop(self.listener);
        self.open.ask_all();
        let _all = self.slots.acquire_many(self.limit).await;
    }

    /// Asks the connection that gives its slot up most readily to close, and again each
    /// [`QUIET`] while none has (one asked to close after its next answer may not be sent
    /// another request for long); returns the slot freed.
    fn make_room(&self) -> impl Future<Output = OwnedSemaphorePermit> + Send + 'static {
        let (slots, open) = (self.slots.clone(), self.open.clone());
        async move {
            loop {
                open.ask_quietest();
                let freed = slots.clone().acquire_owned();
                if let Ok(slot) = tokio::time::timeout(QUIET, freed).await {
                    return slot.expect("the connection semaphore is never closed");
                }
            }
        }
    }

    fn count(&self, io: L::Io, slot: OwnedSemaphorePermit) -> Counted<L::Io> {
        let activity = Arc::new(Activity::new());
        let id = self.open.insert(activity.clone());
        Counted {
            io,
            activity,
            id,
            open: self.open.clone(),
            _slot: slot,
        }
    }
}

impl<L: Listener> Listener for ConnectionLimit<L> {
    type Io = Counted<L::Io>;
    type Addr = L::Addr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        if let Ok(slot) = self.slots.clone().try_acquire_owned() {
            let (io, address) = self.listener.accept().await;
            return (self.count(io, slot), address);
        }
        let (io, address) = self.listener.accept().await;
        // A connection may have closed on its own while this one was awaited.
        let slot = match self.slots.clone().try_acquire_owned() {
            Ok(slot) => slot,
            Err(_) => self.make_room().await,
        };
        (self.count(io, slot), address)
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        self.listener.local_addr()
    }
}

/// How long a connection must have been idle to count as one its client is not about to use.
const QUIET: Duration = Duration::from_secs(1);

/// The open connections, for choosing which one makes room.
#[derive(Default)]
struct Open {
    next_id: AtomicU64,
    connections: Mutex<HashMap<u64, Arc<Activity>>>,
}

impl Open {
    fn insert(&self, activity: Arc<Activity>) -> u64 {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        self.lock().insert(id, activity);
        id
    }

    fn remove(&self, id: u64) {
        self.lock().remove(&id);
    }

    /// Asks the connection that gives its slot up most readily (see the module docs), of those
    /// not yet asked, to close.
    fn ask_quietest(&self) {
        let open = self.lock();
        let now = millis();
        let quietest = open
            .values()
            .filter_map(|activity| Some((activity.readiness(now)?, activity)))
            .min_by_key(|(readiness, _)| *readiness);
        if let Some((_, activity)) = quietest {
            activity.ask_to_close(now);
        }
    }

    fn ask_all(&self) {
        self.lock()
            .values()
            .for_each(|activity| activity.close_now());
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Arc<Activity>>> {
        self.connections.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// What the limit knows of one open connection: when it last read or wrote, and whether it was
/// asked to close.
struct Activity {
    /// [`millis`] at the last read or write, shifted left by one; the low bit
    /// is set when it was a read, i.e. while a request is coming in or being answered.
    last: AtomicU64,
    /// Its next answer says `connection: close`.
    after_answer: AtomicBool,
    /// It was asked to close at once (idle) or after its answer (busy).
    closing_now: AtomicBool,
    close_now: Notify,
}

impl Activity {
    fn new() -> Self {
        let activity = Self {
            last: AtomicU64::new(0),
            after_answer: AtomicBool::new(false),
            closing_now: AtomicBool::new(false),
            close_now: Notify::new(),
        };
        activity.touch(false);
        activity
    }

    fn touch(&self, read: bool) {
        self.last
            .store((millis() << 1) | u64::from(read), Ordering::Relaxed);
    }

    /// How readily it gives its slot up, `now` being [`millis`] (the lowest
    /// first): idle for a while, then busy, then idle a moment; within each, the one in that
    /// state the longest first. `None`: it was asked already, and asking again changes
    /// nothing.
    fn readiness(&self, now: u64) -> Option<(u8, u64)> {
        let last = self.last.load(Ordering::Relaxed);
        let (since, busy) = (last >> 1, last & 1 == 1);
        let rank = if busy {
            1
        } else if now.saturating_sub(since) >= QUIET.as_millis() as u64 {
            0
        } else {
            2
        };
        let asked = self.closing_now.load(Ordering::Relaxed)
            || (rank > 0 && self.after_answer.load(Ordering::Relaxed));
        (!asked).then_some((rank, since))
    }

    /// Asks it to close as its `readiness` allows: at once if idle for a while, else after its
    /// next answer.
    fn ask_to_close(&self, now: u64) {
        match self.readiness(now) {
            Some((0, _)) => self.close_now(),
            Some(_) => self.after_answer.store(true, Ordering::Relaxed),
            None => {}
        }
    }

    /// Asks it to close at once if idle, else after its answer.
    fn close_now(&self) {
        self.closing_now.store(true, Ordering::Relaxed);
        // Stores a permit: a connection not yet waiting for the request still sees it.
        self.close_now.notify_one();
    }
}

/// A connection counted against [`ConnectionLimit`] until it is dropped.
pub struct Counted<Io> {
    io: Io,
    activity: Arc<Activity>,
    id: u64,
    open: Arc<Open>,
    _slot: OwnedSemaphorePermit,
}

impl<Io> Counted<Io> {
    /// What the limit asks of this connection, for the code serving it.
    pub fn closing(&self) -> Closing {
        Closing(self.activity.clone())
    }
}

/// The limit's requests to one connection to close (to make room, or on shutdown).
#[derive(Clone)]
pub struct Closing(Arc<Activity>);

impl Closing {
    /// Completes when the connection is to close at once if idle, else after its answer.
    pub async fn now(&self) {
        self.0.close_now.notified().await;
    }

    /// Whether the answer being sent is to be the connection's last (`connection: close`).
    pub fn after_answer(&self) -> bool {
        self.0.after_answer.load(Ordering::Relaxed)
    }
}

impl<Io> Drop for Counted<Io> {
    fn drop(&mut self) {
        self.open.remove(self.id);
    }
}

/// Milliseconds since the first connection was counted, with room for [`Activity::last`]'s
/// flag bit.
fn millis() -> u64 {
    static EPOCH: LazyLock<Instant> = LazyLock::new(Instant::now);
    u64::try_from(EPOCH.elapsed().as_millis()).unwrap_or(u64::MAX >> 1)
}

/// Notes a write that moved bytes as the connection's last activity.
fn wrote(activity: &Activity, poll: Poll<io::Result<usize>>) -> Poll<io::Result<usize>> {
    if matches!(poll, Poll::Ready(Ok(n)) if n > 0) {
        activity.touch(false);
    }
    poll
}

impl<Io: AsyncRead + Unpin> AsyncRead for Counted<Io> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let poll = Pin::new(&mut self.io).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.activity.touch(true);
        }
        poll
    }
}

impl<Io: AsyncWrite + Unpin> AsyncWrite for Counted<Io> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let poll = Pin::new(&mut self.io).poll_write(cx, buf);
        wrote(&self.activity, poll)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let poll = Pin::new(&mut self.io).poll_write_vectored(cx, bufs);
        wrote(&self.activity, poll)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;
    use std::time::Duration;

    use axum::Router;
    use axum::routing::get;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpStream;

    use super::*;

    const REQUEST: &[u8] = b"GET / HTTP/1.1\r\nhost: hookd\r\n\r\n";
    const SLOW_REQUEST: &[u8] = b"GET /slow HTTP/1.1\r\nhost: hookd\r\n\r\n";

    /// A header timeout no test waits out.
    const LONG: Duration = Duration::from_secs(3600);

    /// Long enough for a request written at once to be read, short for a test to wait out.
    const SHORT: Duration = Duration::from_millis(200);

    /// The `/slow` route's handle: it says when a request came in, and answers once released.
    #[derive(Default)]
    struct Slow {
        started: Notify,
        release: Notify,
    }

    /// Serves "ok" at `/` (and at `/slow`, see [`Slow`]) on a listener holding `limit`
    /// connections, closing those that wait `header_timeout` for a request head; answers its
    /// address.
    async fn server(limit: usize, header_timeout: Duration, slow: Arc<Slow>) -> SocketAddr {
        let app = Router::new().route("/", get(|| async { "ok" })).route(
            "/slow",
            get(move || async move {
                slow.started.notify_one();
                slow.release.notified().await;
                "ok"
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let limited = ConnectionLimit::new(listener, limit);
        tokio::spawn(crate::serve(
            limited,
            app,
            header_timeout,
            std::future::pending(),
        ));
        address
    }

    /// Sends `REQUEST` on `stream` and reads its answer.
    async fn ask(stream: &mut TcpStream) -> String {
        stream.write_all(REQUEST).await.unwrap();
        answer(stream).await
    }

    /// Reads until an answer's body ("ok") is in; a test that hangs instead fails after a
    /// minute.
    async fn answer(stream: &mut TcpStream) -> String {
        let read = async {
            let mut answer = Vec::new();
            while !answer.ends_with(b"\r\n\r\nok") {
                let mut chunk = [0u8; 512];
                let n = stream.read(&mut chunk).await.unwrap();
                assert!(n > 0, "the connection closed before its answer");
                answer.extend_from_slice(&chunk[..n]);
            }
            String::from_utf8(answer).unwrap()
        };
        let answered = tokio::time::timeout(Duration::from_secs(60), read).await;
        answered.expect("the request was never answered")
    }

    /// Whether nothing arrives on `stream` for a while.
    async fn unanswered(stream: &mut TcpStream) -> bool {
        let mut byte = [0u8; 1];
        let read = tokio::time::timeout(Duration::from_millis(300), stream.read(&mut byte));
        read.await.is_err()
    }

    /// A connection that has had one request answered, and is kept alive.
    async fn kept_alive(address: SocketAddr) -> TcpStream {
        let mut stream = TcpStream::connect(address).await.unwrap();
        assert!(ask(&mut stream).await.starts_with("HTTP/1.1 200"));
        stream
    }

    /// Whether the server closed `stream` (a read sees its end).
    async fn closed(stream: &mut TcpStream) -> bool {
        let mut byte = [0u8; 1];
        let read = tokio::time::timeout(Duration::from_secs(60), stream.read(&mut byte)).await;
        matches!(read, Ok(Ok(0)) | Ok(Err(_)))
    }

    #[tokio::test]
    async fn at_the_bound_a_connection_left_idle_is_closed_to_make_room() {
        let address = server(1, LONG, Arc::default()).await;
        let mut idle = kept_alive(address).await;

        let _newcomer = kept_alive(address).await; // answered: room was made
        assert!(closed(&mut idle).await, "the idle connection is still open");
    }

    #[tokio::test]
    async fn a_connection_idle_a_moment_makes_room_after_its_next_answer() {
        let address = server(1, LONG, Arc::default()).await;
        let mut idle = kept_alive(address).await;

        let mut newcomer = TcpStream::connect(address).await.unwrap();
        newcomer.write_all(REQUEST).await.unwrap();
        // Its client may be sending on it right now: it is not cut, and once the newcomer is
        // in, its next answer says it is the last.
        let asking = async {
            loop {
                let answer = ask(&mut idle).await;
                if answer.contains("connection: close") {
                    break;
                }
            }
        };
        let told = tokio::time::timeout(Duration::from_secs(60), asking).await;
        assert!(told.is_ok(), "no answer said the connection closes");
        assert!(closed(&mut idle).await);
        assert!(answer(&mut newcomer).await.starts_with("HTTP/1.1 200"));
    }

    #[tokio::test]
    async fn at_the_bound_the_longest_idle_connection_makes_room() {
        let address = server(2, LONG, Arc::default()).await;
        let mut older = kept_alive(address).await;
        // Activity is noted to the millisecond: let the two idle times differ.
        tokio::time::sleep(Duration::from_millis(20)).await;
        let mut recent = kept_alive(address).await;

        let _newcomer = kept_alive(address).await; // answered: room was made
        assert!(closed(&mut older).await, "the longest idle is still open");
        assert!(
            ask(&mut recent).await.starts_with("HTTP/1.1 200"),
            "the recently used connection was closed"
        );
    }

    #[tokio::test]
    async fn at_the_bound_a_busy_connection_answers_before_it_makes_room() {
        let slow = Arc::new(Slow::default());
        let address = server(1, LONG, slow.clone()).await;
        let mut busy = busy(address, &slow).await;
        let mut newcomer = TcpStream::connect(address).await.unwrap();
        newcomer.write_all(REQUEST).await.unwrap();
        assert!(
            unanswered(&mut newcomer).await,
            "the newcomer was served beside the busy connection"
        );

        slow.release.notify_one();
        let last = answer(&mut busy).await;
        assert!(last.starts_with("HTTP/1.1 200"), "{last}");
        assert!(
            last.to_ascii_lowercase().contains("connection: close"),
            "the busy connection's client was not told it closes: {last}"
        );
        assert!(closed(&mut busy).await);
        assert!(answer(&mut newcomer).await.starts_with("HTTP/1.1 200"));
    }

    /// Opens a connection and starts a `/slow` request on it; returns once it is in progress.
    async fn busy(address: SocketAddr, slow: &Slow) -> TcpStream {
        let mut busy = TcpStream::connect(address).await.unwrap();
        busy.write_all(SLOW_REQUEST).await.unwrap();
        slow.started.notified().await;
        busy
    }

    #[tokio::test]
    async fn at_the_bound_a_busy_connection_makes_room_before_one_idle_a_moment() {
        let slow = Arc::new(Slow::default());
        let address = server(2, LONG, slow.clone()).await;
        let mut busy = busy(address, &slow).await;
        // Used just before the newcomer comes, so well within `QUIET` however slow the machine.
        let mut idle = kept_alive(address).await;

        let mut newcomer = TcpStream::connect(address).await.unwrap();
        newcomer.write_all(REQUEST).await.unwrap();
        assert!(unanswered(&mut newcomer).await, "served before any room");
        assert!(
            ask(&mut idle).await.starts_with("HTTP/1.1 200"),
            "the connection idle a moment was closed"
        );
        slow.release.notify_one();
        assert!(answer(&mut busy).await.contains("connection: close"));
        assert!(answer(&mut newcomer).await.starts_with("HTTP/1.1 200"));
    }

    #[tokio::test]
    async fn at_the_bound_a_connection_idle_a_while_makes_room_before_a_busy_one() {
        let slow = Arc::new(Slow::default());
        let address = server(2, LONG, slow.clone()).await;
        let mut idle = kept_alive(address).await;
        tokio::time::sleep(QUIET + Duration::from_millis(100)).await;
        let mut busy = busy(address, &slow).await;

        let mut newcomer = TcpStream::connect(address).await.unwrap();
        assert!(
            ask(&mut newcomer).await.starts_with("HTTP/1.1 200"),
            "the newcomer waited for the busy connection"
        );
        assert!(closed(&mut idle).await, "the long idle connection is open");
        slow.release.notify_one();
        let last = answer(&mut busy).await;
        assert!(!last.contains("connection: close"), "{last}");
    }

    #[tokio::test]
    async fn a_connection_that_sends_nothing_is_closed() {
        let address = server(4, SHORT, Arc::default()).await;
        let mut silent = TcpStream::connect(address).await.unwrap();
        assert!(
            closed(&mut silent).await,
            "the silent connection is still open"
        );
    }

    #[tokio::test]
    async fn a_kept_alive_connection_left_idle_is_closed() {
        let address = server(4, SHORT, Arc::default()).await;
        let mut idle = kept_alive(address).await;
        assert!(closed(&mut idle).await, "the idle connection is still open");
    }
}
