//! Network namespaces and veth pairs for root-only tests and the apps' AF_XDP benchmarks (not published).
//!
//! A test creates a [`VethPair`]: two network namespaces, A and B, joined by a veth pair, with
//! unique names derived from the process id and a per-process counter, and a `/24` of its
//! own from the one allocator of every suite ([`subnet`]: `10.X.N.0/24` in `10.72.0.0/13`,
//! leased so two suites running at once never share one), removed again by `Drop` (also
//! when the test fails or panics). Side A's interface has no kernel IPv4 address (the
//! datapath under test owns `10.X.N.1`); side B is a plain kernel with `10.X.N.2/24` on its
//! end. Only addresses inside these namespaces are used.
//!
//! Code runs inside a namespace with [`in_netns`] (a fresh thread), [`Held`] (a thread parked
//! there until the guard is dropped) or [`NetnsGuard`] (the calling thread, until dropped).
//!
//! What differs between test suites (names, the environment variable that turns a skip into a
//! failure, the wording of skip reasons) is a [`Suite`]:
//!
//! ```no_run
//! use netns_harness::{in_netns, Suite, VethPair};
//!
//! const SUITE: Suite = Suite::new("cfdemo", "cd", "CORNFLAKES_REQUIRE_DEMO");
//!
//! if let Some(why) = SUITE.skip_reason() {
//!     SUITE.skip("demo", &why);
//!     return;
//! }
//! let v = VethPair::create(&SUITE, 1500).expect("create the veth pair");
//! let ip_b = v.ip_b;
//! let sock = in_netns(&v.ns_b, move || std::net::UdpSocket::bind((ip_b, 0))).unwrap();
//! # drop(sock);
//! ```

//!
//! The apps' AF_XDP benchmarks use the same machinery with one namespace and the host: see
//! [`host`] ([`HostVeth`], [`ChildServer`]).

#![warn(missing_docs)]

pub mod host;
pub mod subnet;
pub use host::{ChildServer, HostVeth};
pub use subnet::Lease;

use std::ffi::CString;
use std::io;
use std::net::Ipv4Addr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc;
use std::thread::JoinHandle;

/// Longest interface name the kernel accepts (`IFNAMSIZ` less the terminating NUL).
pub(crate) const MAX_IFNAME: usize = 15;

/// What one test suite's harness differs in.
#[derive(Clone, Copy, Debug)]
pub struct Suite {
    /// Namespaces are named `{ns_prefix}-{tag}-a` and `{ns_prefix}-{tag}-b`.
    pub ns_prefix: &'static str,
    /// Interfaces are named `{if_prefix}{tag}a` and `{if_prefix}{tag}b`. The tag takes up to
    /// 11 bytes and a name at most 15, so keep this to 2 or 3 bytes.
    pub if_prefix: &'static str,
    /// Environment variable that, set to `1`, turns every skip into a failure: the
    /// environment is declared able to run the tests.
    pub require_var: &'static str,
    /// What needs root, as the skip reason says it: `not running as root (… need it)`.
    pub root_needed_for: &'static str,
    /// A package named when `ip` is missing: `Some("iproute2")` gives
    /// "the \`ip\` command (iproute2) is missing".
    pub ip_package_hint: Option<&'static str>,
}

impl Suite {
    /// A suite named by `ns_prefix` and `if_prefix` (its subnets come from [`subnet`], as
    /// every suite's), whose skips fail under `{require_var}=1`. Skip reasons say root is needed for "network
    /// namespaces and veth" and name no package for `ip`; override
    /// [`root_needed_for`](Self::root_needed_for) and
    /// [`ip_package_hint`](Self::ip_package_hint) with struct update syntax to change that.
    pub const fn new(
        ns_prefix: &'static str,
        if_prefix: &'static str,
        require_var: &'static str,
    ) -> Suite {
        Suite {
            ns_prefix,
            if_prefix,
            require_var,
            root_needed_for: "network namespaces and veth",
            ip_package_hint: None,
        }
    }

    /// Why this machine cannot run the namespace tests (not root, or `ip` or `ethtool`
    /// missing), or `None` when it can.
    pub fn skip_reason(&self) -> Option<String> {
        // SAFETY: geteuid has no preconditions and cannot fail.
        let root = unsafe { libc::geteuid() } == 0;
        self.reason(root, |cmd, arg| {
            Command::new(cmd)
                .arg(arg)
                .output()
                .is_ok_and(|o| o.status.success())
        })
    }

    /// [`Self::skip_reason`], and also why AF_XDP cannot run: the kernel refuses to create an
    /// AF_XDP socket (built without `CONFIG_XDP_SOCKETS`, or forbidden here). `None` when a
    /// test of an AF_XDP server can run.
    pub fn xdp_skip_reason(&self) -> Option<String> {
        self.skip_reason().or_else(|| af_xdp_unavailable().err())
    }

    fn reason(&self, root: bool, runs: impl Fn(&str, &str) -> bool) -> Option<String> {
        if !root {
            return Some(format!(
                "not running as root ({} need it)",
                self.root_needed_for
            ));
        }
        if !runs("ip", "-V") {
            let hint = self
                .ip_package_hint
                .map(|p| format!(" ({p})"))
                .unwrap_or_default();
            return Some(format!("the `ip` command{hint} is missing"));
        }
        if !runs("ethtool", "--version") {
            return Some("the `ethtool` command is missing".into());
        }
        None
    }

    /// Reports that `test` was skipped and why ([`test_skip::skip`]: on the process's stderr
    /// and in `target/skipped.txt`), or panics (a failed test) when
    /// [`require_var`](Self::require_var) or `CORNFLAKES_REQUIRE_ALL` is `1`.
    pub fn skip(&self, test: &str, why: &str) {
        let required = std::env::var(self.require_var).as_deref() == Ok("1");
        self.report_skip(test, why, required);
    }

    fn report_skip(&self, test: &str, why: &str, required: bool) {
        if required {
            panic!("{test}: cannot run ({why}) but {}=1", self.require_var);
        }
        // Visible past the harness's capture, listed in target/skipped.txt, and a failure
        // under CORNFLAKES_REQUIRE_ALL=1 (crates/test-skip).
        test_skip::skip(test, why);
    }
}

/// Whether this kernel lets the caller create an AF_XDP socket; the error says why not.
fn af_xdp_unavailable() -> Result<(), String> {
    // SAFETY: socket(2) takes no pointers; a non-negative result is a descriptor we now own.
    let fd = unsafe { libc::socket(libc::AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        let e = io::Error::last_os_error();
        return Err(format!("the kernel refuses an AF_XDP socket ({e})"));
    }
    // SAFETY: `fd` was just returned by socket(2) and nothing else owns it.
    drop(unsafe { OwnedFd::from_raw_fd(fd) });
    Ok(())
}

/// Whether a network namespace named `name` exists (`ip netns list`): how a test checks that
/// it left none behind.
pub fn namespace_exists(name: &str) -> io::Result<bool> {
    Ok(run(&["netns", "list"])?
        .lines()
        .any(|l| l.split_whitespace().next() == Some(name)))
}

/// Runs `ip` with `args` and returns its stdout, or an error with its stderr.
pub(crate) fn run(args: &[&str]) -> io::Result<String> {
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

pub(crate) static NEXT: AtomicU32 = AtomicU32::new(0);

/// Two namespaces and the veth pair between them; `Drop` removes both namespaces (and with
/// them the pair).
#[derive(Debug)]
pub struct VethPair {
    /// Namespace A (the datapath's side).
    pub ns_a: String,
    /// Namespace B (the plain kernel's side).
    pub ns_b: String,
    /// The veth end in namespace A.
    pub if_a: String,
    /// The veth end in namespace B.
    pub if_b: String,
    /// `10.X.N.1`: for the datapath on side A; not configured on `if_a`.
    pub ip_a: Ipv4Addr,
    /// `10.X.N.2`, configured (`/24`) on `if_b`.
    pub ip_b: Ipv4Addr,
    /// MAC address of `if_a`.
    pub mac_a: [u8; 6],
    /// MAC address of `if_b`.
    pub mac_b: [u8; 6],
    /// MTU of both ends as created (not updated by [`set_mtu`](Self::set_mtu)).
    pub mtu: u32,
    /// The subnet, held until the namespaces are gone (`None`: only named, not created).
    lease: Option<Lease>,
}

impl VethPair {
    /// Creates the namespaces and the pair with `mtu` on both ends (loopback up in each);
    /// side B gets its address and computes UDP checksums in software. Whatever was created
    /// before an error is removed again.
    pub fn create(suite: &Suite, mtu: u32) -> io::Result<VethPair> {
        VethPair::create_with_queues(suite, mtu, 1)
    }

    /// [`Self::create`] with `queues` receive and transmit queues on each end (`ip link add
    /// ... numtxqueues N numrxqueues N`): one per server core. veth delivers a frame to the
    /// peer's receive queue with the index of the transmit queue it was sent on, which the
    /// kernel picks by XPS (the sending CPU, see [`Self::map_tx_queues_to_cpus`]) or a flow
    /// hash — not by destination port.
    pub fn create_with_queues(suite: &Suite, mtu: u32, queues: u32) -> io::Result<VethPair> {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let pid = std::process::id();
        let mut v = VethPair::named(suite, pid, n, 0, mtu);
        if v.if_a.len() > MAX_IFNAME {
            // Nothing exists yet; Drop's deletions fail quietly.
            return Err(io::Error::other(format!(
                "interface name `{}` is longer than {MAX_IFNAME} bytes",
                v.if_a
            )));
        }
        let lease = Lease::take(pid, n)?;
        (v.ip_a, v.ip_b) = (lease.ip(1), lease.ip(2));
        v.lease = Some(lease);
        // From here on Drop removes whatever was created.
        run(&["netns", "add", &v.ns_a])?;
        run(&["netns", "add", &v.ns_b])?;
        let q = queues.max(1).to_string();
        run(&[
            "link",
            "add",
            "name",
            &v.if_a,
            "netns",
            &v.ns_a,
            "numtxqueues",
            &q,
            "numrxqueues",
            &q,
            "type",
            "veth",
            "peer",
            "name",
            &v.if_b,
            "netns",
            &v.ns_b,
            "numtxqueues",
            &q,
            "numrxqueues",
            &q,
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
        software_checksums(Some(&v.ns_b), &v.if_b)?;
        v.mac_a = mac_of(&v.ns_a, &v.if_a)?;
        v.mac_b = mac_of(&v.ns_b, &v.if_b)?;
        Ok(v)
    }

    /// Names of pair number `n` of process `pid`, and addresses in subnet `index` of
    /// [`subnet`]; nothing is created or leased.
    fn named(suite: &Suite, pid: u32, n: u32, index: u16, mtu: u32) -> VethPair {
        let tag = tag(pid, n);
        VethPair {
            ns_a: format!("{}-{tag}-a", suite.ns_prefix),
            ns_b: format!("{}-{tag}-b", suite.ns_prefix),
            if_a: format!("{}{tag}a", suite.if_prefix),
            if_b: format!("{}{tag}b", suite.if_prefix),
            ip_a: subnet::subnet_ip(index, 1),
            ip_b: subnet::subnet_ip(index, 2),
            mac_a: [0; 6],
            mac_b: [0; 6],
            mtu,
            lease: None,
        }
    }

    /// The kernel neighbour entry side B holds for side A's address (`ip neigh show` output,
    /// e.g. containing "REACHABLE"; empty when there is none).
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

    /// Makes side B send on transmit queue `i` whatever CPU `cpus[i]` sends (XPS), so that a
    /// sender pinned to `cpus[i]` reaches side A's receive queue `i`.
    pub fn map_tx_queues_to_cpus(&self, cpus: &[usize]) -> io::Result<()> {
        map_xps(Some(&self.ns_b), &self.if_b, cpus)
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

/// XPS on `ifname` (in namespace `ns`, or here): transmit queue `i` for whatever CPU `cpus[i]`
/// sends.
pub(crate) fn map_xps(ns: Option<&str>, ifname: &str, cpus: &[usize]) -> io::Result<()> {
    for (q, &cpu) in cpus.iter().enumerate() {
        if cpu >= 64 {
            return Err(io::Error::other(format!(
                "CPU {cpu}: only CPUs 0..64 supported"
            )));
        }
        let path = format!("/sys/class/net/{ifname}/queues/tx-{q}/xps_cpus");
        let mask = format!("{:x}", 1u64 << cpu);
        // `ip netns exec` mounts the namespace's own /sys, where the interface is.
        let mut cmd = match ns {
            Some(ns) => {
                let mut c = Command::new("ip");
                c.args(["netns", "exec", ns, "sh", "-c"]);
                c
            }
            None => {
                let mut c = Command::new("sh");
                c.arg("-c");
                c
            }
        };
        let out = cmd.arg(format!("echo {mask} > {path}")).output()?;
        if !out.status.success() {
            return Err(io::Error::other(format!(
                "writing {mask} to {path}{}: {}",
                ns.map(|n| format!(" in {n}")).unwrap_or_default(),
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
    }
    Ok(())
}

/// The name tag of pair `n` of process `pid`: `{pid}x{n}` (the pid's last five digits).
pub(crate) fn tag(pid: u32, n: u32) -> String {
    format!("{}x{n}", pid % 100_000)
}

/// Turns off transmit checksum offload on `ifname` (in namespace `ns`, or here). veth hands
/// the kernel's CHECKSUM_PARTIAL packets on (to XDP, or to a packet socket) with only the
/// pseudo-header sum in the UDP checksum field (a NIC would complete it on the wire); this
/// makes the kernel compute full checksums in software, as any packet from a real link has.
pub(crate) fn software_checksums(ns: Option<&str>, ifname: &str) -> io::Result<()> {
    let mut cmd = match ns {
        Some(ns) => {
            let mut c = Command::new("ip");
            c.args(["netns", "exec", ns, "ethtool"]);
            c
        }
        None => Command::new("ethtool"),
    };
    let st = cmd.args(["-K", ifname, "tx", "off"]).output()?;
    if !st.status.success() {
        return Err(io::Error::other(format!(
            "ethtool -K {ifname} tx off: {}",
            String::from_utf8_lossy(&st.stderr).trim()
        )));
    }
    Ok(())
}

pub(crate) fn mac_of(ns: &str, ifname: &str) -> io::Result<[u8; 6]> {
    mac_in(&run(&["-n", ns, "-o", "link", "show", ifname])?)
}

/// MAC address of `ifname` in the calling process's namespace.
pub(crate) fn mac_of_here(ifname: &str) -> io::Result<[u8; 6]> {
    mac_in(&run(&["-o", "link", "show", ifname])?)
}

fn mac_in(out: &str) -> io::Result<[u8; 6]> {
    let text = out
        .split("link/ether ")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .ok_or_else(|| io::Error::other(format!("no MAC in `{out}`")))?;
    parse_mac(text)
}

/// Parses a MAC address written `aa:bb:cc:dd:ee:ff`.
pub fn parse_mac(text: &str) -> io::Result<[u8; 6]> {
    let parts: Vec<&str> = text.split(':').collect();
    if parts.len() != 6 {
        return Err(io::Error::other(format!("bad MAC `{text}`")));
    }
    let mut mac = [0u8; 6];
    for (m, p) in mac.iter_mut().zip(parts) {
        *m = u8::from_str_radix(p, 16).map_err(io::Error::other)?;
    }
    Ok(mac)
}

/// Runs `f` on a new thread inside network namespace `ns` (a name under `/run/netns`) and
/// returns its result. Sockets created there stay in that namespace wherever they are used
/// afterwards. A panic in `f` comes back as an error carrying its message.
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
    .map_err(|p| {
        let msg = p
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default();
        io::Error::other(format!("thread in {ns} panicked: {msg}"))
    })?
}

/// Keeps what a closure builds inside a namespace alive, on a thread parked there, until the
/// guard is dropped; for values that must also be dropped in their own namespace.
pub struct Held {
    stop: Option<mpsc::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Held {
    /// Runs `f` on a new thread inside namespace `ns` and keeps its value there until the
    /// returned guard is dropped. Fails if the namespace cannot be entered or `f` fails.
    pub fn new<T: 'static>(
        ns: &str,
        f: impl FnOnce() -> io::Result<T> + Send + 'static,
    ) -> io::Result<Held> {
        let (stop_tx, stop_rx) = mpsc::channel::<()>();
        let (ready_tx, ready_rx) = mpsc::channel::<io::Result<()>>();
        let ns = ns.to_string();
        let thread = std::thread::spawn(move || match enter(&ns).and_then(|()| f()) {
            Ok(value) => {
                let _ = ready_tx.send(Ok(()));
                let _ = stop_rx.recv();
                drop(value);
            }
            Err(e) => {
                let _ = ready_tx.send(Err(e));
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

/// Moves the calling thread into a namespace until dropped, then back to where it was; for
/// code that must run on the current thread (e.g. a library initialised once per process).
pub struct NetnsGuard {
    home: OwnedFd,
}

impl NetnsGuard {
    /// Moves the calling thread into namespace `ns` (a name under `/run/netns`).
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

fn open_ns(path: &str) -> io::Result<OwnedFd> {
    let c = CString::new(path).map_err(io::Error::other)?;
    // SAFETY: `c` is a valid NUL-terminated string; the result is checked before it is used.
    let fd = unsafe { libc::open(c.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just opened, is valid, and is owned by nothing else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn setns(fd: &OwnedFd) -> io::Result<()> {
    // SAFETY: `fd` is an open descriptor (borrowed for the call); setns with CLONE_NEWNET
    // only changes the calling thread's network namespace and touches no memory of ours.
    if unsafe { libc::setns(fd.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Moves the calling thread into namespace `ns` for good.
fn enter(ns: &str) -> io::Result<()> {
    setns(&open_ns(&format!("/run/netns/{ns}"))?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{SocketAddrV4, UdpSocket};

    /// This crate's own tests.
    const TEST: Suite = Suite::new("cfnh", "cn", "CORNFLAKES_REQUIRE_NETNS");

    /// Drops a pair that was only named, without its `Drop` (nothing was created, nothing is
    /// to be deleted) and without leaking its names (LeakSanitizer runs these tests).
    fn forget_uncreated(mut v: VethPair) {
        for name in [&mut v.ns_a, &mut v.ns_b, &mut v.if_a, &mut v.if_b] {
            drop(std::mem::take(name));
        }
        std::mem::forget(v);
    }

    #[test]
    fn names_and_addresses_follow_the_suite() {
        let v = VethPair::named(&TEST, 123_456, 3, 258, 9000);
        assert_eq!(
            (v.ns_a.as_str(), v.ns_b.as_str()),
            ("cfnh-23456x3-a", "cfnh-23456x3-b")
        );
        assert_eq!(
            (v.if_a.as_str(), v.if_b.as_str()),
            ("cn23456x3a", "cn23456x3b")
        );
        // Subnet 258 of 10.72.0.0/13.
        assert_eq!(v.ip_a, Ipv4Addr::new(10, 73, 2, 1));
        assert_eq!(v.ip_b, Ipv4Addr::new(10, 73, 2, 2));
        assert_eq!(v.mtu, 9000);
        forget_uncreated(v);
    }

    #[test]
    fn interface_names_fit_the_kernel_limit() {
        let v = VethPair::named(&TEST, 99_999, 99_999, 0, 1500);
        assert!(v.if_a.len() <= MAX_IFNAME && v.if_b.len() <= MAX_IFNAME);
        forget_uncreated(v);
        let long = Suite {
            if_prefix: "toolongprefix",
            ..TEST
        };
        let err = VethPair::create(&long, 1500).unwrap_err();
        assert!(err.to_string().contains("longer than 15 bytes"), "{err}");
    }

    #[test]
    fn skip_reasons_keep_each_suites_wording() {
        let xdp = Suite {
            root_needed_for: "AF_XDP, XDP programs and netns",
            ip_package_hint: Some("iproute2"),
            ..TEST
        };
        let all = |_: &str, _: &str| true;
        let no_ip = |cmd: &str, _: &str| cmd != "ip";
        let no_ethtool = |cmd: &str, _: &str| cmd != "ethtool";
        let root = "not running as root (network namespaces and veth need it)";
        let xdp_root = "not running as root (AF_XDP, XDP programs and netns need it)";
        let xdp_ip = "the `ip` command (iproute2) is missing";
        // Whether a command runs; each case leaves one out, or none.
        type Runs<'a> = &'a dyn Fn(&str, &str) -> bool;
        let cases: [(&Suite, bool, Runs, Option<&str>); 6] = [
            (&xdp, false, &all, Some(xdp_root)),
            (&xdp, true, &no_ip, Some(xdp_ip)),
            (&TEST, false, &all, Some(root)),
            (&TEST, true, &no_ip, Some("the `ip` command is missing")),
            (
                &TEST,
                true,
                &no_ethtool,
                Some("the `ethtool` command is missing"),
            ),
            (&TEST, true, &all, None),
        ];
        for (suite, is_root, runs, want) in cases {
            assert_eq!(suite.reason(is_root, runs).as_deref(), want);
        }
    }

    #[test]
    #[should_panic(expected = "t: cannot run (why) but CORNFLAKES_REQUIRE_NETNS=1")]
    fn a_skip_fails_when_required() {
        TEST.report_skip("t", "why", true);
    }

    #[test]
    fn macs_parse() {
        assert_eq!(
            parse_mac("02:00:0a:ff:7e:01").unwrap(),
            [0x02, 0, 0x0a, 0xff, 0x7e, 0x01]
        );
        assert!(parse_mac("02:00:0a:ff:7e").is_err());
        assert!(parse_mac("02:00:0a:ff:7e:zz").is_err());
    }

    fn netns_id() -> String {
        std::fs::read_link("/proc/thread-self/ns/net")
            .unwrap()
            .display()
            .to_string()
    }

    fn namespaces() -> String {
        run(&["netns", "list"]).unwrap()
    }

    #[test]
    fn a_pair_works_and_is_removed() {
        if let Some(why) = TEST.skip_reason() {
            TEST.skip("a_pair_works_and_is_removed", &why);
            return;
        }
        let v = VethPair::create(&TEST, 1400).expect("create the veth pair");
        let (ns_a, ns_b) = (v.ns_a.clone(), v.ns_b.clone());
        assert!(namespaces().contains(&ns_a) && namespaces().contains(&ns_b));
        assert_ne!(v.mac_a, [0; 6]);
        assert_ne!(v.mac_b, [0; 6]);
        assert_ne!(v.mac_a, v.mac_b);
        let show = |ns: &str, ifn: &str| run(&["-n", ns, "-o", "link", "show", ifn]).unwrap();
        assert!(show(&v.ns_a, &v.if_a).contains("mtu 1400"));
        v.set_mtu(1280).unwrap();
        assert!(show(&v.ns_a, &v.if_a).contains("mtu 1280"));
        assert!(show(&v.ns_b, &v.if_b).contains("mtu 1280"));
        assert_eq!(v.neighbour_of_a_in_b().unwrap().trim(), "");

        // B's address exists in B only.
        let b = SocketAddrV4::new(v.ip_b, 0);
        assert!(UdpSocket::bind(b).is_err());
        let home = netns_id();
        let (sock, there) = in_netns(&v.ns_b, move || (UdpSocket::bind(b), netns_id())).unwrap();
        sock.expect("bind B's address in B");
        assert_ne!(there, home);
        assert_eq!(netns_id(), home, "in_netns left this thread alone");

        let err = in_netns(&v.ns_a, || panic!("on purpose")).unwrap_err();
        assert!(err.to_string().contains("on purpose"), "{err}");

        let (tx, rx) = mpsc::channel();
        let held = Held::new(&v.ns_b, move || {
            struct Tell(mpsc::Sender<String>);
            impl Drop for Tell {
                fn drop(&mut self) {
                    let _ = self.0.send(netns_id());
                }
            }
            Ok((UdpSocket::bind(b)?, Tell(tx)))
        })
        .expect("hold a socket in B");
        assert!(rx.try_recv().is_err(), "still held");
        drop(held);
        assert_eq!(rx.recv().unwrap(), there, "dropped in B");

        {
            let _g = NetnsGuard::enter(&v.ns_b).unwrap();
            assert_eq!(netns_id(), there);
            UdpSocket::bind(b).expect("bind B's address on this thread, in B");
        }
        assert_eq!(netns_id(), home, "the guard brought this thread back");

        drop(v);
        assert!(!namespaces().contains(&ns_a) && !namespaces().contains(&ns_b));
    }

    #[test]
    fn missing_namespaces_are_errors() {
        if let Some(why) = TEST.skip_reason() {
            TEST.skip("missing_namespaces_are_errors", &why);
            return;
        }
        let ns = "cfnh-does-not-exist";
        assert!(in_netns(ns, || ()).is_err());
        assert!(Held::new(ns, || Ok(())).is_err());
        assert!(NetnsGuard::enter(ns).is_err());
    }
}
