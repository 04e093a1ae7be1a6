//! The guard in front of every Kafka broker connection. The Kafka client connects to the
//! bootstrap servers and then to whichever brokers their metadata names; it offers no hook to
//! resolve those names itself, only a SOCKS5 proxy. So each producer gets its own SOCKS5
//! "proxy" on loopback that resolves the requested broker through the [`AddressGuard`] and
//! connects only at an address it allows. TLS, when used, still runs end to end under the
//! broker's name.

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

use crate::{AddressGuard, SinkError};

const VERSION: u8 = 5;
const NO_AUTHENTICATION: u8 = 0;
const CONNECT: u8 = 1;
const IPV4: u8 = 1;
const DOMAIN: u8 = 3;
const IPV6: u8 = 4;
const SUCCEEDED: u8 = 0;
const NOT_ALLOWED: u8 = 2;
const REFUSED: u8 = 5;
const UNSUPPORTED: u8 = 7;

/// A loopback SOCKS5 endpoint that connects only where the guard allows; it stops when
/// dropped.
pub struct Gate {
    address: SocketAddr,
    failure: Arc<Mutex<Option<SinkError>>>,
    listener: JoinHandle<()>,
}

impl Gate {
    /// Listens on a free loopback port.
    pub async fn open(guard: Arc<dyn AddressGuard>) -> Result<Self, SinkError> {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .await
            .map_err(|e| SinkError::Connect(format!("the broker guard's listener: {e}")))?;
        let address = listener
            .local_addr()
            .map_err(|e| SinkError::Connect(format!("the broker guard's listener: {e}")))?;
        let failure = Arc::new(Mutex::new(None));
        let listener = tokio::spawn(serve(listener, guard, Arc::clone(&failure)));
        Ok(Self {
            address,
            failure,
            listener,
        })
    }

    /// Where the Kafka client is to send its SOCKS5 requests.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// Why the latest broker connection failed, if it did ([`SinkError::Refused`] by the guard
    /// or [`SinkError::Connect`]); cleared by the next one that succeeds. The Kafka client only
    /// sees a failed proxy request and retries; this says what happened.
    pub fn failure(&self) -> Option<SinkError> {
        self.failure.lock().expect("not poisoned").clone()
    }
}

impl Drop for Gate {
    fn drop(&mut self) {
        self.listener.abort();
    }
}

async fn serve(
    listener: TcpListener,
    guard: Arc<dyn AddressGuard>,
    failure: Arc<Mutex<Option<SinkError>>>,
) {
    while let Ok((client, _)) = listener.accept().await {
        let guard = Arc::clone(&guard);
        let failure = Arc::clone(&failure);
        tokio::spawn(async move {
            let outcome = pass(client, guard.as_ref()).await;
            *failure.lock().expect("not poisoned") = outcome.err();
        });
    }
}

/// One SOCKS5 exchange (no authentication, CONNECT only), then the bytes both ways.
async fn pass(mut client: TcpStream, guard: &dyn AddressGuard) -> Result<(), SinkError> {
    let (host, port) = request(&mut client).await?;
    let addresses = match guard.resolve(&host, port).await {
        Ok(addresses) => addresses,
        Err(refused) => {
            let _ = reply(&mut client, NOT_ALLOWED).await;
            return Err(refused);
        }
    };
    let Ok(mut broker) = TcpStream::connect(&addresses[..]).await else {
        let _ = reply(&mut client, REFUSED).await;
        return Err(SinkError::Connect(format!(
            "{host}:{port}: connection refused"
        )));
    };
    reply(&mut client, SUCCEEDED).await?;
    tokio::spawn(async move {
        let _ = tokio::io::copy_bidirectional(&mut client, &mut broker).await;
    });
    Ok(())
}

/// Reads the greeting and the CONNECT request: the broker's host and port.
async fn request(client: &mut TcpStream) -> Result<(String, u16), SinkError> {
    let [version, methods] = read::<2>(client).await?;
    let mut offered = vec![0; usize::from(methods)];
    client.read_exact(&mut offered).await.map_err(io)?;
    if version != VERSION || !offered.contains(&NO_AUTHENTICATION) {
        return Err(SinkError::Connect(
            "the Kafka client spoke no SOCKS5".into(),
        ));
    }
    client
        .write_all(&[VERSION, NO_AUTHENTICATION])
        .await
        .map_err(io)?;
    let [_, command, _, kind] = read::<4>(client).await?;
    let host = match kind {
        IPV4 => Ipv4Addr::from(read::<4>(client).await?).to_string(),
        IPV6 => Ipv6Addr::from(read::<16>(client).await?).to_string(),
        DOMAIN => {
            let [length] = read::<1>(client).await?;
            let mut name = vec![0; usize::from(length)];
            client.read_exact(&mut name).await.map_err(io)?;
            String::from_utf8(name).map_err(|_| SinkError::Connect("a broker name".into()))?
        }
        _ => String::new(),
    };
    let port = u16::from_be_bytes(read::<2>(client).await?);
    if command != CONNECT || host.is_empty() {
        let _ = reply(client, UNSUPPORTED).await;
        return Err(SinkError::Connect(
            "the Kafka client asked for no broker".into(),
        ));
    }
    Ok((host, port))
}

async fn reply(client: &mut TcpStream, status: u8) -> Result<(), SinkError> {
    // The bound address is not used by the client: 0.0.0.0:0.
    let answer = [VERSION, status, 0, IPV4, 0, 0, 0, 0, 0, 0];
    client.write_all(&answer).await.map_err(io)
}

async fn read<const N: usize>(client: &mut TcpStream) -> Result<[u8; N], SinkError> {
    let mut buffer = [0; N];
    client.read_exact(&mut buffer).await.map_err(io)?;
    Ok(buffer)
}

fn io(error: std::io::Error) -> SinkError {
    SinkError::Connect(format!("the broker guard: {error}"))
}
