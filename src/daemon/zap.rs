//! The server side of CURVE: making the locker's sockets CURVE servers, and
//! the ZAP handler (ZeroMQ RFC 27) that lets in only allowlisted clients.
//!
//! The handler is an inproc REP socket on the daemon's own context, polled by
//! the daemon's one loop like any other socket: libzmq's I/O thread asks it
//! about each new CURVE connection and waits for the answer without blocking
//! anything else. It must be bound before any CURVE server socket binds, or
//! the first connections would be let in unchecked. Until the handler answers
//! "200", a client's requests are not delivered at all, so a refused client
//! simply gets no answer. Peers are let in the same way: the PUB socket that
//! peers subscribe to admits only the configured peers' keys. This module
//! decides who may connect; it never sees a request.

use tracing::{info, warn};

use super::transport::{zmq_err, TransportError};
use crate::curve::{Allowlist, KeyPair, PublicKey, ServerCurve, KEY_BYTES};

/// Where libzmq sends ZAP requests (fixed by RFC 27).
const ZAP_ENDPOINT: &str = "inproc://zeromq.zap.01";

/// The ZAP domain of the REP socket that clients ask on.
const CLIENTS_DOMAIN: &str = "clients";
/// The ZAP domain of the PUB socket that peers subscribe to.
const PEERS_DOMAIN: &str = "peers";

/// Frames in a ZAP request before the credentials.
const ZAP_HEADER_FRAMES: usize = 6;

/// The ZAP handler and what it has refused.
pub struct Gate {
    zap: zmq::Socket,
    /// The clients allowed to ask; `None` lets in any client with the server key.
    clients: Option<Allowlist>,
    /// The peers allowed to subscribe to the counts.
    peers: Option<Allowlist>,
    /// Whether a client let in is named by its key (Z85) as the user id,
    /// which its messages then carry as `User-Id`: so the loop can tell
    /// admins (`admin_keys`) apart.
    names_clients: bool,
    refused: u64,
}

/// What a ZAP request asks, read from its frames.
struct ZapRequest<'a> {
    request_id: &'a [u8],
    domain: &'a [u8],
    address: &'a [u8],
    /// The client's public key, when the mechanism is CURVE.
    key: Option<PublicKey>,
}

impl Gate {
    /// Binds the ZAP handler on `ctx` when `curve` has a client allowlist
    /// or `peers` (the keys of the configured peers) is given; without a
    /// client allowlist every client that knows the server key may connect,
    /// which is logged so that it is a visible choice.
    pub fn start(
        ctx: &zmq::Context,
        curve: &ServerCurve,
        peers: Option<Allowlist>,
    ) -> Result<Option<Gate>, TransportError> {
        info!(server_key = %curve.keys.public, "CURVE on: requests and replies are encrypted");
        match &curve.clients {
            Some(clients) => info!(clients = clients.len(), "CURVE clients limited to the allowlist"),
            None => warn!("no CURVE client allowlist: any client that knows the server key may connect"),
        }
        if let Some(peers) = &peers {
            info!(peers = peers.len(), "peer subscriptions limited to the configured peers' keys");
        }
        let names_clients = !curve.admins.is_empty();
        if curve.clients.is_none() && peers.is_none() && !names_clients {
            return Ok(None);
        }
        let zap = ctx.socket(zmq::REP).map_err(zmq_err("creating the ZAP socket"))?;
        zap.set_linger(0).map_err(zmq_err("setting ZMQ_LINGER"))?;
        zap.bind(ZAP_ENDPOINT).map_err(zmq_err(format!("binding {ZAP_ENDPOINT}")))?;
        Ok(Some(Gate { zap, clients: curve.clients.clone(), peers, names_clients, refused: 0 }))
    }

    /// The ZAP socket, for the loop's poll.
    pub fn poll_item(&self) -> zmq::PollItem<'_> {
        self.zap.as_poll_item(zmq::POLLIN)
    }

    /// Lets in the keys of `peers` to subscribe from now on (a reload that
    /// changed them). A subscription let in before stays until it ends.
    pub fn set_peers(&mut self, peers: Allowlist) {
        if self.peers.is_some() {
            self.peers = Some(peers);
        }
    }

    /// How many connections have been refused since the start.
    pub fn refused(&self) -> u64 {
        self.refused
    }

    /// Answers every waiting ZAP request; returns how many.
    pub fn answer_waiting(&mut self) -> Result<usize, TransportError> {
        let mut answered = 0;
        loop {
            let frames = match self.zap.recv_multipart(zmq::DONTWAIT) {
                Ok(frames) => frames,
                Err(zmq::Error::EAGAIN | zmq::Error::EINTR) => return Ok(answered),
                Err(e) => return Err(zmq_err("receiving a ZAP request")(e)),
            };
            let reply = self.decide(&frames);
            self.zap.send_multipart(reply, 0).map_err(zmq_err("answering a ZAP request"))?;
            answered += 1;
        }
    }

    /// The reply frames to one ZAP request.
    fn decide(&mut self, frames: &[Vec<u8>]) -> Vec<Vec<u8>> {
        let Some(request) = ZapRequest::parse(frames) else {
            warn!(frames = frames.len(), "malformed ZAP request refused");
            self.refused += 1;
            let request_id = frames.get(1).cloned().unwrap_or_default();
            return reply(&request_id, "400", "malformed request");
        };
        let address = String::from_utf8_lossy(request.address);
        let Some(key) = request.key else {
            self.refused += 1;
            warn!(peer = %address, refused = self.refused, "connection without CURVE refused");
            return reply(request.request_id, "400", "CURVE required");
        };
        if self.allows(request.domain, &key) {
            let mut ok = reply(request.request_id, "200", "OK");
            if self.names_clients && request.domain == CLIENTS_DOMAIN.as_bytes() {
                ok[USER_ID_FRAME] = key.to_z85().into_bytes();
            }
            return ok;
        }
        self.refused += 1;
        let domain = String::from_utf8_lossy(request.domain);
        warn!(peer = %address, key = %key, %domain, refused = self.refused, "CURVE client not in the allowlist refused");
        reply(request.request_id, "400", "key not allowed")
    }

    /// Whether `key` may connect to the socket of `domain`.
    fn allows(&self, domain: &[u8], key: &PublicKey) -> bool {
        let list = match domain {
            d if d == CLIENTS_DOMAIN.as_bytes() => &self.clients,
            d if d == PEERS_DOMAIN.as_bytes() => &self.peers,
            _ => return false,
        };
        match list {
            Some(l) => l.allows(key),
            None => true,
        }
    }
}

impl<'a> ZapRequest<'a> {
    /// Reads the frames of RFC 27: version, request id, domain, address,
    /// identity, mechanism, then credentials (for CURVE one 32-byte key).
    fn parse(frames: &'a [Vec<u8>]) -> Option<ZapRequest<'a>> {
        if frames.len() < ZAP_HEADER_FRAMES || frames[0] != b"1.0" {
            return None;
        }
        let key = match (frames[5].as_slice(), &frames[ZAP_HEADER_FRAMES..]) {
            (b"CURVE", [key]) => Some(PublicKey(<[u8; KEY_BYTES]>::try_from(key.as_slice()).ok()?)),
            _ => None,
        };
        Some(ZapRequest { request_id: &frames[1], domain: &frames[2], address: &frames[3], key })
    }
}

/// Where a ZAP reply names the user (RFC 27): its fifth frame.
const USER_ID_FRAME: usize = 4;

fn reply(request_id: &[u8], status: &str, text: &str) -> Vec<Vec<u8>> {
    vec![b"1.0".to_vec(), request_id.to_vec(), status.into(), text.into(), Vec::new(), Vec::new()]
}

/// Makes the REP socket that clients ask on a CURVE server; call before it
/// binds.
pub fn secure_rep(socket: &zmq::Socket, keys: &KeyPair) -> Result<(), TransportError> {
    secure_server(socket, keys, CLIENTS_DOMAIN)
}

/// Makes the PUB socket that peers subscribe to a CURVE server; call before
/// it binds.
pub fn secure_pub(socket: &zmq::Socket, keys: &KeyPair) -> Result<(), TransportError> {
    secure_server(socket, keys, PEERS_DOMAIN)
}

/// Makes a SUB socket a CURVE client of the peer whose public key is
/// `peer`, presenting this locker's own key pair.
pub fn peer_client(socket: &zmq::Socket, keys: &KeyPair, peer: &PublicKey) -> Result<(), TransportError> {
    socket.set_curve_serverkey(&peer.0).map_err(zmq_err("setting ZMQ_CURVE_SERVERKEY"))?;
    socket.set_curve_publickey(&keys.public.0).map_err(zmq_err("setting ZMQ_CURVE_PUBLICKEY"))?;
    socket.set_curve_secretkey(keys.secret.bytes()).map_err(zmq_err("setting ZMQ_CURVE_SECRETKEY"))
}

fn secure_server(socket: &zmq::Socket, keys: &KeyPair, domain: &str) -> Result<(), TransportError> {
    socket.set_curve_server(true).map_err(zmq_err("setting ZMQ_CURVE_SERVER"))?;
    socket.set_curve_secretkey(keys.secret.bytes()).map_err(zmq_err("setting ZMQ_CURVE_SECRETKEY"))?;
    socket.set_zap_domain(domain).map_err(zmq_err("setting ZMQ_ZAP_DOMAIN"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(domain: &str, mechanism: &str, credentials: &[&[u8]]) -> Vec<Vec<u8>> {
        let mut frames: Vec<Vec<u8>> =
            ["1.0", "7", domain, "127.0.0.1", "", mechanism].iter().map(|f| f.as_bytes().to_vec()).collect();
        frames.extend(credentials.iter().map(|c| c.to_vec()));
        frames
    }

    fn gate(allowed: PublicKey) -> Gate {
        let ctx = zmq::Context::new();
        let zap = ctx.socket(zmq::REP).unwrap();
        Gate { zap, clients: Some(Allowlist::of([allowed])), peers: None, names_clients: false, refused: 0 }
    }

    #[test]
    fn allowlisted_keys_get_200_and_others_400() {
        let (yes, no) = (KeyPair::generate().unwrap().public, KeyPair::generate().unwrap().public);
        let mut g = gate(yes);
        let ok = g.decide(&request(CLIENTS_DOMAIN, "CURVE", &[&yes.0]));
        assert_eq!(ok, [&b"1.0"[..], b"7", b"200", b"OK", b"", b""]);
        let refused = g.decide(&request(CLIENTS_DOMAIN, "CURVE", &[&no.0]));
        assert_eq!(refused[2], b"400");
        assert_eq!(g.refused(), 1);
    }

    #[test]
    fn anything_but_a_curve_key_is_refused() {
        let key = KeyPair::generate().unwrap().public;
        let mut g = gate(key);
        assert_eq!(g.decide(&request(CLIENTS_DOMAIN, "NULL", &[]))[2], b"400");
        assert_eq!(g.decide(&request(CLIENTS_DOMAIN, "CURVE", &[b"short"]))[2], b"400");
        assert_eq!(g.decide(&request("elsewhere", "CURVE", &[&key.0]))[2], b"400");
        let mut old = request(CLIENTS_DOMAIN, "CURVE", &[&key.0]);
        old[0] = b"0.9".to_vec();
        assert_eq!(g.decide(&old)[..3], [&b"1.0"[..], b"7", b"400"]);
        assert_eq!(g.decide(&[b"1.0".to_vec()])[2], b"400");
        assert_eq!(g.refused(), 5);
    }

    #[test]
    fn only_configured_peers_may_subscribe() {
        let (client, peer, stranger) = (
            KeyPair::generate().unwrap().public,
            KeyPair::generate().unwrap().public,
            KeyPair::generate().unwrap().public,
        );
        let mut g = gate(client);
        g.peers = Some(Allowlist::of([peer]));
        assert_eq!(g.decide(&request(PEERS_DOMAIN, "CURVE", &[&peer.0]))[2], b"200");
        assert_eq!(g.decide(&request(PEERS_DOMAIN, "CURVE", &[&stranger.0]))[2], b"400");
        assert_eq!(g.decide(&request(PEERS_DOMAIN, "CURVE", &[&client.0]))[2], b"400", "a client is no peer");
        g.clients = None;
        assert_eq!(g.decide(&request(CLIENTS_DOMAIN, "CURVE", &[&stranger.0]))[2], b"200", "no client allowlist");
    }
}
