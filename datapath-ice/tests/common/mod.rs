//! Test harness: skip reporting, and two network namespaces joined by a veth pair, created
//! with unique names and removed by a `Drop` guard (also when a test fails or panics).
//!
//! Side A is DPDK's (`net_af_packet` on its veth end; the interface has no kernel IPv4
//! address: our stack owns 10.78.N.1); side B is a plain kernel with 10.78.N.2 and ordinary
//! UDP sockets. Only addresses inside these namespaces are used.

#![allow(dead_code)]

use std::ffi::CString;
use std::io;
use std::net::Ipv4Addr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

/// Prints that `test` was skipped and why, or fails it when `CORNFLAKES_REQUIRE_ICE=1` says
/// this environment must run it.
pub fn skip(test: &str, why: &str) {
    if std::env::var("CORNFLAKES_REQUIRE_ICE").as_deref() == Ok("1") {
        panic!("{test}: cannot run ({why}) but CORNFLAKES_REQUIRE_ICE=1");
    }
    // Straight to stderr: the harness captures println! of passing tests, a skip must show.
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "SKIPPED {test}: {why}");
}

/// Why the namespace tests cannot run here, or `None`.
pub fn netns_skip_reason() -> Option<String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Some("not running as root (network namespaces and veth need it)".into());
    }
    for (cmd, arg) in [("ip", "-V"), ("ethtool", "--version")] {
        match Command::new(cmd).arg(arg).output() {
            Ok(o) if o.status.success() => {}
            _ => return Some(format!("the `{cmd}` command is missing")),
        }
    }
    None
}

fn run(args: &[&str]) -> io::Result<String> {
    let out = Command::new("ip").args(args).output()?;
    if !out.status.success() {
        return Err(io::Error::other(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

static NEXT: AtomicU32 = AtomicU32::new(0);

/// Two namespaces and the veth pair between them.
pub struct VethPair {
    pub ns_a: String,
    pub ns_b: String,
    pub if_a: String,
    pub if_b: String,
    pub ip_a: Ipv4Addr,
    pub ip_b: Ipv4Addr,
    pub mac_a: [u8; 6],
}

impl VethPair {
    /// Creates the namespaces and the pair (MTU 1500); side B gets its address.
    pub fn create() -> io::Result<VethPair> {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let pid = std::process::id() % 100_000;
        let tag = format!("{pid}x{n}");
        let subnet = (pid.wrapping_mul(7).wrapping_add(n) % 250 + 1) as u8;
        let mut v = VethPair {
            ns_a: format!("cfice-{tag}-a"),
            ns_b: format!("cfice-{tag}-b"),
            if_a: format!("ci{tag}a"),
            if_b: format!("ci{tag}b"),
            ip_a: Ipv4Addr::new(10, 78, subnet, 1),
            ip_b: Ipv4Addr::new(10, 78, subnet, 2),
            mac_a: [0; 6],
        };
        // From here on Drop removes whatever was created.
        run(&["netns", "add", &v.ns_a])?;
        run(&["netns", "add", &v.ns_b])?;
        run(&[
            "link", "add", "name", &v.if_a, "netns", &v.ns_a, "type", "veth", "peer", "name",
            &v.if_b, "netns", &v.ns_b,
        ])?;
        for (ns, ifn) in [(&v.ns_a, &v.if_a), (&v.ns_b, &v.if_b)] {
            run(&["-n", ns, "link", "set", "lo", "up"])?;
            run(&["-n", ns, "link", "set", ifn, "mtu", "1500", "up"])?;
        }
        run(&[
            "-n",
            &v.ns_b,
            "addr",
            "add",
            &format!("{}/24", v.ip_b),
            "dev",
            &v.if_b,
        ])?;
        // veth passes the kernel's CHECKSUM_PARTIAL packets on with only the pseudo-header sum
        // in the UDP checksum (a NIC would complete it). Make B's kernel compute full checksums,
        // as any packet from a real link has them.
        let st = Command::new("ip")
            .args([
                "netns", "exec", &v.ns_b, "ethtool", "-K", &v.if_b, "tx", "off",
            ])
            .output()?;
        if !st.status.success() {
            return Err(io::Error::other(format!(
                "ethtool -K {} tx off: {}",
                v.if_b,
                String::from_utf8_lossy(&st.stderr).trim()
            )));
        }
        v.mac_a = mac_of(&v.ns_a, &v.if_a)?;
        Ok(v)
    }
}

impl Drop for VethPair {
    fn drop(&mut self) {
        // Deleting a namespace destroys the veth end inside it, and with it the pair.
        let _ = run(&["netns", "del", &self.ns_a]);
        let _ = run(&["netns", "del", &self.ns_b]);
    }
}

fn mac_of(ns: &str, ifname: &str) -> io::Result<[u8; 6]> {
    let out = run(&["-n", ns, "-o", "link", "show", ifname])?;
    let text = out
        .split("link/ether ")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .ok_or_else(|| io::Error::other(format!("no MAC in `{out}`")))?;
    let mut mac = [0u8; 6];
    let parts: Vec<&str> = text.split(':').collect();
    if parts.len() != 6 {
        return Err(io::Error::other(format!("bad MAC `{text}`")));
    }
    for (m, p) in mac.iter_mut().zip(parts) {
        *m = u8::from_str_radix(p, 16).map_err(io::Error::other)?;
    }
    Ok(mac)
}

/// Runs `f` on a new thread inside namespace `ns` and returns its result. Sockets created
/// there stay in that namespace wherever they are used afterwards.
pub fn in_netns<T: Send + 'static>(
    ns: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> io::Result<T> {
    let ns_owned = ns.to_string();
    std::thread::spawn(move || -> io::Result<T> {
        enter(&ns_owned)?;
        Ok(f())
    })
    .join()
    .map_err(|_| io::Error::other(format!("thread in {ns} panicked")))?
}

fn open_ns(path: &str) -> io::Result<OwnedFd> {
    let c = CString::new(path).map_err(io::Error::other)?;
    // SAFETY: `c` is a valid C string; the result is checked before it is wrapped.
    let fd = unsafe { libc::open(c.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just opened and is owned by nothing else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn setns(fd: &OwnedFd) -> io::Result<()> {
    // SAFETY: `fd` refers to a network namespace; setns only changes this thread's.
    if unsafe { libc::setns(fd.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

fn enter(ns: &str) -> io::Result<()> {
    setns(&open_ns(&format!("/run/netns/{ns}"))?)
}

/// Moves the calling thread into namespace `ns` until dropped, then back to where it was.
pub struct NetnsGuard {
    home: OwnedFd,
}

impl NetnsGuard {
    pub fn enter(ns: &str) -> io::Result<NetnsGuard> {
        let home = open_ns("/proc/thread-self/ns/net")?;
        enter(ns)?;
        Ok(NetnsGuard { home })
    }
}

impl Drop for NetnsGuard {
    fn drop(&mut self) {
        if let Err(e) = setns(&self.home) {
            // Not a panic: this may run while unwinding, and the namespaces must still be
            // removed by their guard. What runs later on this thread will fail loudly.
            eprintln!("returning to the original network namespace failed: {e}");
        }
    }
}
