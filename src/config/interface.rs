//! The address of a network interface by its name (`lo`, `eth0`), so that
//! `--bind tcp://eth0:7777` binds that interface's address: the bundled
//! libzmq is built without interface lookup and would fail with "No such
//! device".
//!
//! This module only asks the kernel for the interfaces' addresses
//! (`getifaddrs`); it binds nothing.

use std::net::IpAddr;

/// The first IPv4 address of interface `name`, else its first IPv6 one;
/// `None` when no interface has that name or it has no address.
#[cfg(target_os = "linux")]
pub fn address(name: &str) -> Option<IpAddr> {
    let mut found: Vec<IpAddr> = Vec::new();
    let mut list: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills `list` with a linked list that stays valid
    // until freeifaddrs; every pointer read below is checked for null, and
    // an address is read as the family its sa_family says.
    unsafe {
        if libc::getifaddrs(&mut list) != 0 {
            return None;
        }
        let mut at = list;
        while !at.is_null() {
            let entry = &*at;
            at = entry.ifa_next;
            if entry.ifa_addr.is_null() || entry.ifa_name.is_null() {
                continue;
            }
            if std::ffi::CStr::from_ptr(entry.ifa_name).to_bytes() != name.as_bytes() {
                continue;
            }
            match i32::from((*entry.ifa_addr).sa_family) {
                libc::AF_INET => {
                    let sin = &*(entry.ifa_addr as *const libc::sockaddr_in);
                    found.push(IpAddr::from(u32::from_be(sin.sin_addr.s_addr).to_be_bytes()));
                }
                libc::AF_INET6 => {
                    let sin6 = &*(entry.ifa_addr as *const libc::sockaddr_in6);
                    found.push(IpAddr::from(sin6.sin6_addr.s6_addr));
                }
                _ => {}
            }
        }
        libc::freeifaddrs(list);
    }
    found.iter().find(|ip| ip.is_ipv4()).or(found.first()).copied()
}

/// Without `getifaddrs` no name is known as an interface.
#[cfg(not(target_os = "linux"))]
pub fn address(_name: &str) -> Option<IpAddr> {
    None
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[test]
    fn the_loopback_interface_is_127_0_0_1_and_an_unknown_name_is_none() {
        assert_eq!(address("lo"), Some(IpAddr::from([127, 0, 0, 1])));
        assert_eq!(address("no-such-interface"), None);
    }
}
