//! ZeroMQ TCP endpoints as an operator writes them, made bindable.
//!
//! ZeroMQ binds `tcp://HOST:PORT` only when HOST is `*`, an IP address or a
//! network interface, so `tcp://localhost:7777` fails with "No such device";
//! and a port past 65535 is not refused. [`for_bind`] checks the port and
//! turns a host name into its address; [`check`] only checks the port, for
//! endpoints that are connected to (ZeroMQ resolves names when
//! connecting). Other transports (`ipc://`, `inproc://`) pass unchanged.

use std::net::{IpAddr, ToSocketAddrs};

/// Why an endpoint cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EndpointError {
    #[error("{0}: a tcp endpoint is tcp://HOST:PORT")]
    NoPort(String),
    #[error("{endpoint}: the port must be * or a number from 0 to 65535, got {port:?}")]
    BadPort { endpoint: String, port: String },
}

/// `endpoint` with its port checked.
pub fn check(endpoint: &str) -> Result<(), EndpointError> {
    split(endpoint).map(|_| ())
}

/// `endpoint` ready to bind: its port checked, and a host name replaced by
/// the address it resolves to (IPv4 first, as ZeroMQ binds IPv4 unless told
/// otherwise). A name that does not resolve is left for ZeroMQ, which also
/// accepts interface names such as `eth0`.
pub fn for_bind(endpoint: &str) -> Result<String, EndpointError> {
    let Some((host, port)) = split(endpoint)? else {
        return Ok(endpoint.to_owned());
    };
    if host == "*" || host.starts_with('[') || host.parse::<IpAddr>().is_ok() {
        return Ok(endpoint.to_owned());
    }
    match resolve(host) {
        Some(IpAddr::V4(ip)) => Ok(format!("tcp://{ip}:{port}")),
        Some(IpAddr::V6(ip)) => Ok(format!("tcp://[{ip}]:{port}")),
        None => Ok(endpoint.to_owned()),
    }
}

/// The host and port of a tcp endpoint, or `None` for another transport.
fn split(endpoint: &str) -> Result<Option<(&str, &str)>, EndpointError> {
    let Some(rest) = endpoint.strip_prefix("tcp://") else {
        return Ok(None);
    };
    let (host, port) = rest.rsplit_once(':').ok_or_else(|| EndpointError::NoPort(endpoint.to_owned()))?;
    if host.is_empty() {
        return Err(EndpointError::NoPort(endpoint.to_owned()));
    }
    if port != "*" && port.parse::<u16>().is_err() {
        return Err(EndpointError::BadPort { endpoint: endpoint.to_owned(), port: port.to_owned() });
    }
    Ok(Some((host, port)))
}

fn resolve(host: &str) -> Option<IpAddr> {
    let addrs: Vec<IpAddr> = (host, 0).to_socket_addrs().ok()?.map(|a| a.ip()).collect();
    addrs.iter().find(|ip| ip.is_ipv4()).or(addrs.first()).copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_names_resolve_for_binding() {
        assert_eq!(for_bind("tcp://localhost:17777").unwrap(), "tcp://127.0.0.1:17777");
        assert_eq!(for_bind("tcp://localhost:*").unwrap(), "tcp://127.0.0.1:*");
    }

    #[test]
    fn addresses_wildcards_and_other_transports_pass_unchanged() {
        for endpoint in ["tcp://*:7777", "tcp://127.0.0.1:*", "tcp://[::1]:5", "ipc:///tmp/locker", "inproc://x"] {
            assert_eq!(for_bind(endpoint).unwrap(), endpoint);
        }
    }

    #[test]
    fn ports_past_65535_and_missing_ports_are_refused() {
        let bad =
            |port: &str| EndpointError::BadPort { endpoint: format!("tcp://127.0.0.1:{port}"), port: port.into() };
        assert_eq!(for_bind("tcp://127.0.0.1:70000"), Err(bad("70000")));
        assert_eq!(check("tcp://127.0.0.1:-1"), Err(bad("-1")));
        assert_eq!(check("tcp://127.0.0.1:http"), Err(bad("http")));
        assert_eq!(check("tcp://127.0.0.1"), Err(EndpointError::NoPort("tcp://127.0.0.1".into())));
        assert_eq!(check("tcp://:5"), Err(EndpointError::NoPort("tcp://:5".into())));
        assert!(check("tcp://localhost:65535").is_ok());
    }
}
