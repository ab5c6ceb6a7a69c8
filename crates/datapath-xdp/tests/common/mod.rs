//! Test harness: two network namespaces joined by a veth pair, created per test with unique
//! names and removed by a `Drop` guard (also when the test fails or panics).
//!
//! Side A holds the AF_XDP socket (the interface has no kernel IPv4 address: our stack owns
//! 10.77.N.1); side B is a plain kernel with 10.77.N.2 on its end and ordinary UDP sockets.
//! Only addresses inside these namespaces are used.

#![allow(dead_code)]

use std::ffi::CString;
use std::io;
use std::net::Ipv4Addr;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

/// Why an environment cannot run the root tests, or `None` when it can.
pub fn skip_reason() -> Option<String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Some("not running as root (AF_XDP, XDP programs and netns need it)".into());
    }
    match Command::new("ip").arg("-V").output() {
        Ok(o) if o.status.success() => {}
        _ => return Some("the `ip` command (iproute2) is missing".into()),
    }
    match Command::new("ethtool").arg("--version").output() {
        Ok(o) if o.status.success() => None,
        _ => Some("the `ethtool` command is missing".into()),
    }
}

/// Prints why a test is skipped, or fails it when `CORNFLAKES_REQUIRE_XDP=1` says the
/// environment must support it.
pub fn skip(test: &str, why: &str) {
    if std::env::var("CORNFLAKES_REQUIRE_XDP").as_deref() == Ok("1") {
        panic!("{test}: cannot run ({why}) but CORNFLAKES_REQUIRE_XDP=1");
    }
    // Written to the process's stderr directly: the test harness captures `println!` and
    // `eprintln!` of passing tests, and a skip must be visible.
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "SKIPPED {test}: {why}");
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
    pub mac_b: [u8; 6],
    pub mtu: u32,
}

impl VethPair {
    /// Creates the namespaces and the pair with `mtu` on both ends; side B gets its address.
    pub fn create(mtu: u32) -> io::Result<VethPair> {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let pid = std::process::id() % 100_000;
        let tag = format!("{pid}x{n}");
        let subnet = (pid.wrapping_mul(7).wrapping_add(n) % 250 + 1) as u8;
        let mut v = VethPair {
            ns_a: format!("cfxdp-{tag}-a"),
            ns_b: format!("cfxdp-{tag}-b"),
            if_a: format!("cx{tag}a"),
            if_b: format!("cx{tag}b"),
            ip_a: Ipv4Addr::new(10, 77, subnet, 1),
            ip_b: Ipv4Addr::new(10, 77, subnet, 2),
            mac_a: [0; 6],
            mac_b: [0; 6],
            mtu,
        };
        // From here on Drop removes whatever was created.
        run(&["netns", "add", &v.ns_a])?;
        run(&["netns", "add", &v.ns_b])?;
        run(&[
            "link", "add", "name", &v.if_a, "netns", &v.ns_a, "type", "veth", "peer", "name",
            &v.if_b, "netns", &v.ns_b,
        ])?;
        let mtu_s = mtu.to_string();
        for (ns, ifn) in [(&v.ns_a, &v.if_a), (&v.ns_b, &v.if_b)] {
            run(&["-n", ns, "link", "set", "lo", "up"])?;
            run(&["-n", ns, "link", "set", ifn, "mtu", &mtu_s, "up"])?;
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
        // veth hands the kernel's CHECKSUM_PARTIAL packets to XDP with only the pseudo-header
        // sum in the UDP checksum field (a NIC would complete it on the wire). Make B's kernel
        // compute full checksums in software, as any packet from a real link has them.
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
        v.mac_b = mac_of(&v.ns_b, &v.if_b)?;
        Ok(v)
    }

    /// The kernel neighbour entry side B holds for side A's address, e.g. "REACHABLE".
    pub fn neighbour_of_a_in_b(&self) -> io::Result<String> {
        run(&[
            "-n",
            &self.ns_b,
            "neigh",
            "show",
            &self.ip_a.to_string(),
            "dev",
            &self.if_b,
        ])
    }

    /// Sets the MTU of both ends.
    pub fn set_mtu(&self, mtu: u32) -> io::Result<()> {
        let m = mtu.to_string();
        run(&["-n", &self.ns_a, "link", "set", &self.if_a, "mtu", &m])?;
        run(&["-n", &self.ns_b, "link", "set", &self.if_b, "mtu", &m])?;
        Ok(())
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

/// Runs `f` on a new thread inside network namespace `ns` and returns its result. Sockets
/// created there stay in that namespace wherever they are used afterwards.
pub fn in_netns<T: Send + 'static>(
    ns: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> io::Result<T> {
    let ns_owned = ns.to_string();
    std::thread::spawn(move || -> io::Result<T> {
        in_this_thread(&ns_owned)?;
        Ok(f())
    })
    .join()
    .map_err(|p| {
        let msg = p
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default();
        io::Error::other(format!("thread in {ns} panicked: {msg}"))
    })?
}

/// Keeps what `f` builds inside namespace `ns` alive (on a thread parked there) until the
/// returned guard is dropped; for values that must be dropped in their own namespace.
pub struct Held {
    stop: Option<std::sync::mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Held {
    pub fn new<T: 'static>(
        ns: &str,
        f: impl FnOnce() -> io::Result<T> + Send + 'static,
    ) -> io::Result<Held> {
        let (stop_tx, stop_rx) = std::sync::mpsc::channel::<()>();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel::<io::Result<()>>();
        let ns = ns.to_string();
        let thread = std::thread::spawn(move || {
            let r = in_this_thread(&ns).and_then(|()| f());
            match r {
                Ok(value) => {
                    let _ = ready_tx.send(Ok(()));
                    let _ = stop_rx.recv();
                    drop(value);
                }
                Err(e) => {
                    let _ = ready_tx.send(Err(e));
                }
            }
        });
        let held = Held {
            stop: Some(stop_tx),
            thread: Some(thread),
        };
        ready_rx
            .recv()
            .map_err(|_| io::Error::other("holder thread died"))??;
        Ok(held)
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn in_this_thread(ns: &str) -> io::Result<()> {
    let path = CString::new(format!("/run/netns/{ns}")).map_err(io::Error::other)?;
    // SAFETY: `path` is a valid C string; the descriptor is checked and closed below.
    let fd = unsafe { libc::open(path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` refers to a network namespace; setns only changes this thread's.
    let r = unsafe { libc::setns(fd, libc::CLONE_NEWNET) };
    let err = io::Error::last_os_error();
    // SAFETY: opened above, closed once.
    unsafe { libc::close(fd) };
    if r != 0 {
        return Err(err);
    }
    Ok(())
}
