//! The connection bound on real listeners on loopback: which connection makes room at the
//! limit and at a client's cap, and what each one's client sees.

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
