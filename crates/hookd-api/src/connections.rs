//! The bound on open connections, the share of it one client may hold, and which connection
//! makes room when a new one arrives at either.
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
//! - one that has not sent a whole first request head a second ([`QUIET`]) after it was
//!   opened, the oldest first: it closes at once, losing nothing (no request was started on
//!   it). Such connections cost a flood nothing to open, so they go before any client's;
//! - one idle for a while, the longest idle first: it closes at once, and its client, whose
//!   pool reuses its most recently used connections, is not about to send on it;
//! - one busy with a request, the longest busy first, then one idle (or opened) a moment ago:
//!   it closes after its next answer, which says so (`connection: close`). Closing it at once
//!   could catch its client sending the next request, which would then be lost to it.
//!
//! One connection at a time is taken past the limit this way; the others wait in the kernel's
//! accept queue.
//!
//! One client address must not hold the whole limit, or its flood (connections that send
//! nothing, or half a request head, reopened as fast as they are closed) keeps everyone else's
//! connections in the accept queue. So each address (IPv6: each /64, what one host is given)
//! holds at most its cap ([`ConnectionLimit::per_client`]): a newcomer at its address's cap is
//! served in the place of one of that address's own connections, in the order above, never
//! another's. Where none of them can close at once, it is taken while the address holds less
//! than an eighth more than its cap (one of its own is asked to close after its answer, unless
//! as many are already leaving), then only in the place of one of its own with no request
//! under way, closed at once; with every one of them busy, it is closed at once. The accept
//! loop never waits for a client's own room.

use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::serve::Listener;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};

/// A listener that holds at most `limit` connections open, and at most its per-client cap
/// from one client address; a connection arriving at either is served in the place of one
/// asked to close (see the module docs).
pub struct ConnectionLimit<L> {
    listener: L,
    limit: u32,
    per_client: usize,
    slots: Arc<Semaphore>,
    open: Arc<Open>,
}

impl<L: Listener<Addr = SocketAddr>> ConnectionLimit<L> {
    /// At most `limit` connections, with no cap per client.
    pub fn new(listener: L, limit: usize) -> Self {
        let limit = u32::try_from(limit.max(1)).unwrap_or(u32::MAX);
        Self {
            listener,
            limit,
            per_client: 0,
            slots: Arc::new(Semaphore::new(limit as usize)),
            open: Arc::new(Open::default()),
        }
    }

    /// At most `cap` of them from one client address (0: no cap).
    pub fn per_client(mut self, cap: usize) -> Self {
        self.per_client = cap;
        self
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

    fn count(&self, io: L::Io, client: IpAddr, slot: OwnedSemaphorePermit) -> Counted<L::Io> {
        let activity = Arc::new(Activity::new(client));
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

impl<L: Listener<Addr = SocketAddr>> Listener for ConnectionLimit<L> {
    type Io = Counted<L::Io>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            let free = self.slots.clone().try_acquire_owned().ok();
            let (io, address) = self.listener.accept().await;
            let client = client_of(address);
            if !self.open.admit(client, self.per_client) {
                tracing::debug!(%client, "a connection past its client's cap was closed");
                continue;
            }
            // A connection may have closed on its own while this one was awaited.
            let slot = match free.or_else(|| self.slots.clone().try_acquire_owned().ok()) {
                Some(slot) => slot,
                None => self.make_room().await,
            };
            return (self.count(io, client, slot), address);
        }
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        self.listener.local_addr()
    }
}

/// The address a connection's client is counted under: its IPv4 address (an IPv4-mapped
/// IPv6 one included), or its IPv6 /64, which one host is usually given whole.
fn client_of(address: SocketAddr) -> IpAddr {
    match address.ip() {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(Ipv6Addr::from(u128::from(v6) & !(u128::MAX >> 64))),
        },
        v4 => v4,
    }
}

/// How long a connection must have been idle to count as one its client is not about to use,
/// and how long a new connection has to send its first request head before it counts as one
/// its peer may not mean to use.
const QUIET: Duration = Duration::from_secs(1);

/// How readily a connection gives its slot up (see the module docs), the readiest first.
type Rank = u8;
const UNUSED: Rank = 0;
const IDLE: Rank = 1;
const BUSY: Rank = 2;
const RECENT: Rank = 3;

/// The open connections, for choosing which one makes room.
#[derive(Default)]
struct Open {
    next_id: AtomicU64,
    connections: Mutex<Connections>,
}

#[derive(Default)]
struct Connections {
    by_id: HashMap<u64, Arc<Activity>>,
    per_client: HashMap<IpAddr, usize>,
}

impl Open {
    fn insert(&self, activity: Arc<Activity>) -> u64 {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let mut open = self.lock();
        *open.per_client.entry(activity.client).or_default() += 1;
        open.by_id.insert(id, activity);
        id
    }

    fn remove(&self, id: u64) {
        let mut open = self.lock();
        let Some(activity) = open.by_id.remove(&id) else {
            return;
        };
        if let Some(count) = open.per_client.get_mut(&activity.client) {
            *count -= 1;
            if *count == 0 {
                open.per_client.remove(&activity.client);
            }
        }
    }

    /// Asks the connection that gives its slot up most readily (see the module docs), of those
    /// not yet asked, to close.
    fn ask_quietest(&self) {
        let open = self.lock();
        let now = millis();
        if let Some((_, activity)) = quietest(open.by_id.values(), now) {
            activity.ask_to_close(now);
        }
    }

    /// Whether a newcomer from `client` is to be served under the per-client `cap` (0: none);
    /// at the cap, one of the client's own connections is asked to close in its place (see
    /// the module docs).
    fn admit(&self, client: IpAddr, cap: usize) -> bool {
        let open = self.lock();
        if cap == 0 || open.per_client.get(&client).copied().unwrap_or(0) < cap {
            return true;
        }
        let own = || open.by_id.values().filter(|a| a.client == client);
        // Those asked to close at once are on their way out.
        let staying = own().filter(|a| !a.closing_now.load(Ordering::Relaxed));
        let staying = staying.count();
        if staying < cap {
            return true;
        }
        let now = millis();
        let readiest = quietest(own(), now);
        if let Some((rank, activity)) = readiest
            && rank <= IDLE
        {
            activity.close_now();
            return true;
        }
        if staying >= cap + cap.div_ceil(8) {
            // Past its allowance, only one with no request under way makes room, at once.
            let unoccupied = quietest(own().filter(|a| !a.busy()), now);
            unoccupied.inspect(|(_, activity)| activity.close_now());
            return unoccupied.is_some();
        }
        // Those already asked to close after their answers make room soon: asking one more
        // for each newcomer would turn a client's pool over faster and faster.
        let unasked = own().filter(|a| !a.asked()).count();
        if let Some((_, activity)) = readiest.filter(|_| unasked >= cap) {
            activity.ask_to_close(now);
        }
        true
    }

    fn ask_all(&self) {
        self.lock()
            .by_id
            .values()
            .for_each(|activity| activity.close_now());
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Connections> {
        self.connections.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Of `connections`, the one that gives its slot up most readily and has not been asked to
/// already, with its rank.
fn quietest<'a>(
    connections: impl Iterator<Item = &'a Arc<Activity>>,
    now: u64,
) -> Option<(Rank, &'a Arc<Activity>)> {
    connections
        .filter_map(|activity| Some((activity.readiness(now)?, activity)))
        .min_by_key(|(readiness, _)| *readiness)
        .map(|((rank, _), activity)| (rank, activity))
}

/// What the limit knows of one open connection: its client, when it was opened, whether a
/// request came in on it, when it last read or wrote, and whether it was asked to close.
struct Activity {
    client: IpAddr,
    /// [`millis`] when it was opened.
    opened: u64,
    /// A whole request head came in on it.
    requested: AtomicBool,
    /// [`millis`] at the last read or write, shifted left by one; the low bit
    /// is set when it was a read, i.e. while a request is coming in or being answered.
    last: AtomicU64,
    /// Its next answer says `connection: close`.
    after_answer: AtomicBool,
    /// It was asked to close at once (idle or unused) or after its answer (busy).
    closing_now: AtomicBool,
    close_now: Notify,
}

impl Activity {
    fn new(client: IpAddr) -> Self {
        let activity = Self {
            client,
            opened: millis(),
            requested: AtomicBool::new(false),
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

    /// How readily it gives its slot up, `now` being [`millis`] (the lowest first), and since
    /// when it has been in that state (the earliest first); `None`: it was asked already, and
    /// asking again changes nothing.
    fn readiness(&self, now: u64) -> Option<(Rank, u64)> {
        if self.closing_now.load(Ordering::Relaxed) {
            return None;
        }
        let quiet = |since: u64| now.saturating_sub(since) >= QUIET.as_millis() as u64;
        if !self.requested.load(Ordering::Relaxed) {
            // No answer is coming to close it after: it stays a candidate until it goes.
            let rank = if quiet(self.opened) { UNUSED } else { RECENT };
            return Some((rank, self.opened));
        }
        let since = self.last.load(Ordering::Relaxed) >> 1;
        let rank = match () {
            () if self.busy() => BUSY,
            () if quiet(since) => IDLE,
            () => RECENT,
        };
        let asked = rank > IDLE && self.after_answer.load(Ordering::Relaxed);
        (!asked).then_some((rank, since))
    }

    /// Whether a request is coming in or being answered on it.
    fn busy(&self) -> bool {
        self.requested.load(Ordering::Relaxed) && self.last.load(Ordering::Relaxed) & 1 == 1
    }

    /// Whether it was asked to close, at once or after its answer.
    fn asked(&self) -> bool {
        self.closing_now.load(Ordering::Relaxed) || self.after_answer.load(Ordering::Relaxed)
    }

    /// Asks it to close as its `readiness` allows: at once if unused or idle for a while, else
    /// after its next answer.
    fn ask_to_close(&self, now: u64) {
        match self.readiness(now) {
            Some((UNUSED | IDLE, _)) => self.close_now(),
            Some(_) => self.after_answer.store(true, Ordering::Relaxed),
            None => {}
        }
    }

    /// Asks it to close at once if idle or unused, else after its answer.
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

    /// Notes that a whole request head came in: from then on the connection is one a client
    /// uses, no longer among the first to make room, and closed gracefully when asked.
    pub fn note_request(&self) {
        self.0.requested.store(true, Ordering::Relaxed);
    }

    /// Whether a whole request head has come in on the connection.
    pub fn requested(&self) -> bool {
        self.0.requested.load(Ordering::Relaxed)
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
        let timeouts = crate::Timeouts {
            first_request: LONG,
            header: header_timeout,
        };
        server_with(limit, 0, timeouts, slow).await
    }

    /// [`server`] with a cap of `per_client` connections per client address and `timeouts`.
    async fn server_with(
        limit: usize,
        per_client: usize,
        timeouts: crate::Timeouts,
        slow: Arc<Slow>,
    ) -> SocketAddr {
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
        let limited = ConnectionLimit::new(listener, limit).per_client(per_client);
        tokio::spawn(crate::serve(limited, app, timeouts, std::future::pending()));
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
        kept_alive_from([127, 0, 0, 1], address).await
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
        busy_from([127, 0, 0, 1], address, slow).await
    }

    /// [`busy`] from `client`'s address.
    async fn busy_from(client: [u8; 4], address: SocketAddr, slow: &Slow) -> TcpStream {
        let mut busy = connect_from(client, address).await;
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

    /// The address the tests' second client connects from (loopback is all of 127.0.0.0/8).
    const OTHER_CLIENT: [u8; 4] = [127, 0, 0, 2];

    /// A connection to `address` from `client`'s address.
    async fn connect_from(client: [u8; 4], address: SocketAddr) -> TcpStream {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind(SocketAddr::from((client, 0))).unwrap();
        socket.connect(address).await.unwrap()
    }

    /// A connection from `client` that has had one request answered, and is kept alive.
    async fn kept_alive_from(client: [u8; 4], address: SocketAddr) -> TcpStream {
        let mut stream = connect_from(client, address).await;
        assert!(ask(&mut stream).await.starts_with("HTTP/1.1 200"));
        stream
    }

    /// Timeouts no test waits out, but for a new connection's first request head: [`SHORT`].
    const FIRST_SHORT: crate::Timeouts = crate::Timeouts {
        first_request: SHORT,
        header: LONG,
    };

    /// Timeouts no test waits out.
    const NEVER: crate::Timeouts = crate::Timeouts {
        first_request: LONG,
        header: LONG,
    };

    #[tokio::test]
    async fn at_its_cap_a_client_replaces_its_own_idle_connection_not_anothers() {
        let address = server_with(4, 2, NEVER, Arc::default()).await;
        // Idle the longest of all: without the cap, the one to go first.
        let mut others = kept_alive(address).await;
        tokio::time::sleep(Duration::from_millis(20)).await;
        let mut own_older = kept_alive_from(OTHER_CLIENT, address).await;
        tokio::time::sleep(Duration::from_millis(20)).await;
        let mut own_recent = kept_alive_from(OTHER_CLIENT, address).await;
        tokio::time::sleep(QUIET + Duration::from_millis(100)).await;

        let _newcomer = kept_alive_from(OTHER_CLIENT, address).await;
        assert!(closed(&mut own_older).await, "its own longest idle is open");
        assert!(ask(&mut own_recent).await.starts_with("HTTP/1.1 200"));
        assert!(
            ask(&mut others).await.starts_with("HTTP/1.1 200"),
            "another client's connection made room"
        );
    }

    #[tokio::test]
    async fn past_its_allowance_with_all_its_own_busy_a_clients_newcomer_is_closed() {
        let slow = Arc::new(Slow::default());
        let address = server_with(8, 1, NEVER, slow.clone()).await;
        // At its cap of one, then one past it by its allowance: both busy.
        let mut first = busy_from(OTHER_CLIENT, address, &slow).await;
        let _second = busy_from(OTHER_CLIENT, address, &slow).await;

        let mut refused = connect_from(OTHER_CLIENT, address).await;
        assert!(closed(&mut refused).await, "served past the allowance");
        let _others = kept_alive(address).await; // another client is served
        slow.release.notify_one();
        let last = answer(&mut first).await;
        assert!(last.contains("connection: close"), "{last}");
    }

    #[tokio::test]
    async fn past_its_allowance_a_clients_newcomer_replaces_its_own_connection_not_in_use() {
        let slow = Arc::new(Slow::default());
        let address = server_with(8, 1, NEVER, slow.clone()).await;
        let mut busy = busy_from(OTHER_CLIENT, address, &slow).await;
        // Used a moment ago: not one to close at once, but for its client's own newcomer.
        let mut idle = kept_alive_from(OTHER_CLIENT, address).await;

        let _newcomer = kept_alive_from(OTHER_CLIENT, address).await;
        assert!(closed(&mut idle).await, "its own unused connection is open");
        slow.release.notify_one();
        assert!(answer(&mut busy).await.starts_with("HTTP/1.1 200"));
    }

    #[tokio::test]
    async fn at_the_bound_a_connection_with_no_whole_request_makes_room_before_an_idle_one() {
        let address = server(2, LONG, Arc::default()).await;
        let mut idle = kept_alive(address).await;
        let mut unused = TcpStream::connect(address).await.unwrap();
        // Half a head: bytes come in, yet no request is started.
        unused.write_all(&REQUEST[..10]).await.unwrap();
        tokio::time::sleep(QUIET + Duration::from_millis(100)).await;

        let _newcomer = kept_alive(address).await; // answered: room was made
        assert!(closed(&mut unused).await, "the unused connection is open");
        assert!(
            ask(&mut idle).await.starts_with("HTTP/1.1 200"),
            "the idle connection made room before the unused one"
        );
    }

    #[tokio::test]
    async fn a_new_connection_without_a_whole_first_head_in_time_is_closed() {
        let address = server_with(4, 0, FIRST_SHORT, Arc::default()).await;
        let mut partial = TcpStream::connect(address).await.unwrap();
        partial.write_all(&REQUEST[..10]).await.unwrap();
        assert!(closed(&mut partial).await, "the connection is still open");
    }

    #[tokio::test]
    async fn a_kept_alive_connection_has_the_header_timeout_not_the_first_request_deadline() {
        let address = server_with(4, 0, FIRST_SHORT, Arc::default()).await;
        let mut idle = kept_alive(address).await;
        tokio::time::sleep(SHORT * 3).await;
        assert!(ask(&mut idle).await.starts_with("HTTP/1.1 200"));
    }

    #[tokio::test]
    async fn a_first_request_answered_after_the_first_request_deadline_is_not_cut() {
        let slow = Arc::new(Slow::default());
        let address = server_with(4, 0, FIRST_SHORT, slow.clone()).await;
        let mut busy = busy(address, &slow).await;
        tokio::time::sleep(SHORT * 3).await;
        slow.release.notify_one();
        assert!(answer(&mut busy).await.starts_with("HTTP/1.1 200"));
    }

    #[test]
    fn a_client_is_its_ipv4_address_or_its_ipv6_64() {
        let at = |text: &str| client_of(SocketAddr::new(text.parse().unwrap(), 443));
        assert_eq!(at("192.0.2.7"), "192.0.2.7".parse::<IpAddr>().unwrap());
        assert_eq!(at("::ffff:192.0.2.7"), at("192.0.2.7"));
        assert_eq!(at("2001:db8:1:2::1"), at("2001:db8:1:2:ffff::9"));
        assert_ne!(at("2001:db8:1:2::1"), at("2001:db8:1:3::1"));
    }
}
