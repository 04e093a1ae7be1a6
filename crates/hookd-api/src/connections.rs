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
mod tests;
