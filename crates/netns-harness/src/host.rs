//! A server in a namespace, its clients here: what the apps' AF_XDP benchmarks (`echo bench
//! --datapath xdp`, `calibrate run --datapath xdp`, `kv bench --datapath xdp`) and their
//! tests run on.
//!
//! [`HostVeth`] is one namespace holding one end of a veth pair, whose other end stays in the
//! calling process's namespace with a kernel address (the clients' side). [`ChildServer`] runs
//! a server binary inside that namespace as a child process under `ip netns exec`: the app
//! crates have no `unsafe`, so they cannot move a thread with `setns(2)` themselves (and an
//! XDP program belongs to one interface, so a separate process per server is natural anyway).
//!
//! The child is started with the server command line both apps share:
//! `ARGS --datapath xdp --ifname IF --bind IP:PORT --peer CLIENT_IP=CLIENT_MAC
//! --until-stdin-closes`; it prints a line starting with the ready marker once its datapath is
//! up, and exits when its standard input closes ([`ChildServer::stop`]).

use std::io::{self, BufRead, BufReader, Write as _};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::time::Duration;

use crate::{mac_of, mac_of_here, run, Lease, Suite, MAX_IFNAME, NEXT};

/// A namespace holding the server end (`server_if`) of a veth pair whose client end
/// (`client_if`) stays in the calling process's namespace. Dropping it deletes the namespace,
/// and with it the pair.
#[derive(Debug)]
pub struct HostVeth {
    /// Namespace name: `{ns_prefix}-{pid}x{n}` of the [`Suite`].
    pub name: String,
    /// Interface in the namespace (the datapath's; no kernel address).
    pub server_if: String,
    /// Interface here (the clients'), with `client_ip/24`.
    pub client_if: String,
    /// `10.X.N.1`: the address the server's datapath answers on (not configured in the
    /// kernel: XDP takes its traffic).
    pub server_ip: Ipv4Addr,
    /// `10.X.N.2`: the clients' address.
    pub client_ip: Ipv4Addr,
    /// MAC address of `client_if`.
    pub client_mac: [u8; 6],
    /// The subnet, held until the namespace is gone (`None`: only named, not created).
    lease: Option<Lease>,
}

impl HostVeth {
    /// Creates the namespace and the pair with `mtu` on both ends; the client end gets its
    /// address and computes UDP checksums in software. Whatever was created before an error
    /// is removed again.
    pub fn create(suite: &Suite, mtu: u32) -> io::Result<HostVeth> {
        HostVeth::create_with_queues(suite, mtu, 1)
    }

    /// [`Self::create`] with `queues` receive and transmit queues on each end: one per server
    /// core. As with [`crate::VethPair::create_with_queues`], the server end receives a frame
    /// on the queue with the index of the client end's transmit queue, which XPS picks by the
    /// sending CPU ([`Self::map_tx_queues_to_cpus`]).
    pub fn create_with_queues(suite: &Suite, mtu: u32, queues: u32) -> io::Result<HostVeth> {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let pid = std::process::id();
        let mut v = HostVeth::named(suite, pid, n, 0);
        if v.server_if.len() > MAX_IFNAME {
            return Err(io::Error::other(format!(
                "interface name `{}` is longer than {MAX_IFNAME} bytes",
                v.server_if
            )));
        }
        // The client end's address is in this (the host's) namespace: its subnet must be
        // no other suite's.
        let lease = Lease::take(pid, n)?;
        (v.server_ip, v.client_ip) = (lease.ip(1), lease.ip(2));
        v.lease = Some(lease);
        run(&["netns", "add", &v.name])?;
        // From here on Drop removes the namespace (and the pair with it).
        let q = queues.max(1).to_string();
        run(&[
            "link",
            "add",
            "name",
            &v.client_if,
            "numtxqueues",
            &q,
            "numrxqueues",
            &q,
            "type",
            "veth",
            "peer",
            "name",
            &v.server_if,
            "netns",
            &v.name,
            "numtxqueues",
            &q,
            "numrxqueues",
            &q,
        ])?;
        quiet_ipv6(&v.client_if)?;
        let mtu = mtu.to_string();
        run(&["-n", &v.name, "link", "set", "lo", "up"])?;
        run(&[
            "-n",
            &v.name,
            "link",
            "set",
            &v.server_if,
            "mtu",
            &mtu,
            "up",
        ])?;
        run(&["link", "set", &v.client_if, "mtu", &mtu, "up"])?;
        run(&[
            "addr",
            "add",
            &format!("{}/24", v.client_ip),
            "dev",
            &v.client_if,
        ])?;
        crate::software_checksums(None, &v.client_if)?;
        v.client_mac = mac_of_here(&v.client_if)?;
        // The server end's MAC must exist too (a sanity check that the pair is complete).
        let server_mac = mac_of(&v.name, &v.server_if)?;
        if queues > 1 {
            // A permanent neighbour entry for the server: a datagram sent before ARP resolved
            // would be held and sent later from the CPU that handled the ARP reply, i.e. on
            // that CPU's transmit queue, not the sender's, and reach the wrong server core.
            run(&[
                "neigh",
                "replace",
                &v.server_ip.to_string(),
                "lladdr",
                &format_mac(server_mac),
                "dev",
                &v.client_if,
                "nud",
                "permanent",
            ])?;
        }
        Ok(v)
    }

    /// Names of pair number `n` of process `pid`, and addresses in subnet `index` of
    /// [`crate::subnet`]; nothing is created or leased.
    fn named(suite: &Suite, pid: u32, n: u32, index: u16) -> HostVeth {
        let tag = crate::tag(pid, n);
        HostVeth {
            name: format!("{}-{tag}", suite.ns_prefix),
            server_if: format!("{}{tag}s", suite.if_prefix),
            client_if: format!("{}{tag}c", suite.if_prefix),
            server_ip: crate::subnet::subnet_ip(index, 1),
            client_ip: crate::subnet::subnet_ip(index, 2),
            client_mac: [0; 6],
            lease: None,
        }
    }

    /// Makes the client end send on transmit queue `i` whatever CPU `cpus[i]` sends (XPS), so
    /// that a client thread pinned to `cpus[i]` reaches the server end's receive queue `i`.
    pub fn map_tx_queues_to_cpus(&self, cpus: &[usize]) -> io::Result<()> {
        crate::map_xps(None, &self.client_if, cpus)
    }

    /// The server's `--peer` argument: `CLIENT_IP=CLIENT_MAC` (a static ARP entry, so the
    /// first replies need not wait for address resolution).
    pub fn peer_arg(&self) -> String {
        format!("{}={}", self.client_ip, format_mac(self.client_mac))
    }
}

impl Drop for HostVeth {
    fn drop(&mut self) {
        // Deleting the namespace destroys the veth end inside it, and with it the pair.
        let _ = run(&["netns", "del", &self.name]);
    }
}

/// Runs `f(q)` for every queue `q` at once, each on its own thread pinned to `cpus[q]`, and
/// returns the results in queue order. After [`HostVeth::map_tx_queues_to_cpus`]`(cpus)`,
/// whatever thread `q` sends leaves on the client end's transmit queue `q`, so it arrives on
/// the server end's receive queue `q`: at server core `q`. The clients of a multi-queue test
/// run here. An error when a thread cannot be pinned; a panic in `f` is raised again here
/// once every thread has ended.
pub fn on_queue_cpus<T: Send>(cpus: &[usize], f: impl Fn(usize) -> T + Sync) -> io::Result<Vec<T>> {
    let f = &f;
    std::thread::scope(|s| {
        let threads: Vec<_> = cpus
            .iter()
            .enumerate()
            .map(|(q, &cpu)| {
                s.spawn(move || {
                    percore::pin_current_thread(cpu).map_err(|e| {
                        io::Error::new(
                            e.kind(),
                            format!("pinning queue {q}'s thread to CPU {cpu}: {e}"),
                        )
                    })?;
                    Ok(f(q))
                })
            })
            .collect();
        threads
            .into_iter()
            .map(|t| t.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    })
}

/// Turns IPv6 off on `ifname` here, before it comes up: the clients use IPv4 only, and
/// without this the kernel's router solicitations and multicast listener reports would
/// reach the server's XDP program too (which passes them to the kernel, counted `passed`).
/// Nothing to do on a kernel without IPv6.
fn quiet_ipv6(ifname: &str) -> io::Result<()> {
    let path = format!("/proc/sys/net/ipv6/conf/{ifname}/disable_ipv6");
    match std::fs::write(&path, "1") {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        r => r.map_err(|e| io::Error::new(e.kind(), format!("writing 1 to {path}: {e}"))),
    }
}

/// Formats a MAC address as `aa:bb:cc:dd:ee:ff`.
pub fn format_mac(mac: [u8; 6]) -> String {
    let [a, b, c, d, e, f] = mac;
    format!("{a:02x}:{b:02x}:{c:02x}:{d:02x}:{e:02x}:{f:02x}")
}

/// Parses a server's `--peer IP=MAC` argument.
pub fn parse_peer(arg: &str) -> Result<(Ipv4Addr, [u8; 6]), String> {
    let (ip, mac) = arg
        .split_once('=')
        .ok_or_else(|| format!("--peer {arg:?}: expected IP=MAC"))?;
    let ip: Ipv4Addr = ip.parse().map_err(|e| format!("--peer {ip:?}: {e}"))?;
    let mac = crate::parse_mac(mac).map_err(|e| format!("--peer {arg:?}: {e}"))?;
    Ok((ip, mac))
}

/// A server binary running as a child process inside a [`HostVeth`]'s namespace. Its stderr
/// is echoed (indented) on ours and kept for [`stop`](Self::stop). Dropped without `stop`
/// (an error path), the child is killed.
pub struct ChildServer {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<String>,
    startup: Vec<String>,
    /// Where it listens.
    pub addr: SocketAddrV4,
}

impl ChildServer {
    /// Starts `exe ARGS` plus the shared AF_XDP server flags (see the module docs) in `ns` on
    /// port `port`, and waits up to `timeout` for a stderr line starting with `ready`.
    pub fn spawn(
        ns: &HostVeth,
        exe: &Path,
        args: &[String],
        port: u16,
        ready: &str,
        timeout: Duration,
    ) -> Result<ChildServer, String> {
        let addr = SocketAddrV4::new(ns.server_ip, port);
        let mut all = args.to_vec();
        all.extend(
            [
                "--datapath",
                "xdp",
                "--ifname",
                &ns.server_if,
                "--bind",
                &addr.to_string(),
                "--peer",
                &ns.peer_arg(),
            ]
            .map(str::to_owned),
        );
        ChildServer::spawn_in(&ns.name, exe, &all, addr, ready, timeout)
    }

    /// Starts `exe ARGS --until-stdin-closes` in namespace `ns` (any datapath; `addr` is
    /// where it listens, as the arguments say) and waits up to `timeout` for a stderr line
    /// starting with `ready`.
    pub fn spawn_in(
        ns: &str,
        exe: &Path,
        args: &[String],
        addr: SocketAddrV4,
        ready: &str,
        timeout: Duration,
    ) -> Result<ChildServer, String> {
        let mut child = Command::new("ip")
            .args(["netns", "exec", ns])
            .arg(exe)
            .args(args)
            .arg("--until-stdin-closes")
            .stdin(Stdio::piped())
            .stderr(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .map_err(|e| format!("starting {} in {ns}: {e}", exe.display()))?;
        let stdin = child.stdin.take();
        let stderr = child.stderr.take().ok_or("no stderr pipe")?;
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                eprintln!("  {line}");
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut p = ChildServer {
            child,
            stdin,
            lines,
            startup: Vec::new(),
            addr,
        };
        let deadline = std::time::Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match p.lines.recv_timeout(left) {
                Ok(l) if l.starts_with(ready) => {
                    p.startup.push(l);
                    return Ok(p);
                }
                Ok(l) => p.startup.push(l),
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    let status = p.child.wait().map_err(|e| e.to_string())?;
                    p.stdin = None;
                    return Err(format!(
                        "the server in {ns} exited ({status}) before it was ready (see its output above)"
                    ));
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    return Err(format!(
                        "the server in {ns} was not ready within {timeout:?} (see its output above)"
                    ));
                }
            }
        }
    }

    /// The stderr lines the server printed up to and including the ready line.
    pub fn startup_lines(&self) -> &[String] {
        &self.startup
    }

    /// Closes the server's standard input, waits for it to exit and returns the stderr lines
    /// it printed after the ready line (its final counters among them). An exit with failure
    /// is an error.
    pub fn stop(mut self) -> Result<Vec<String>, String> {
        if let Some(mut s) = self.stdin.take() {
            let _ = s.flush();
        }
        let status = self
            .child
            .wait()
            .map_err(|e| format!("waiting for the server: {e}"))?;
        // The reader thread ends (and the channel closes) at the child's end of output.
        let lines: Vec<String> = self.lines.iter().collect();
        if !status.success() {
            return Err(format!("the server exited with {status}"));
        }
        Ok(lines)
    }
}

impl Drop for ChildServer {
    fn drop(&mut self) {
        // Only reached without `stop` (an error path): do not leave the child behind.
        if self.stdin.is_some() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SUITE: Suite = Suite::new("cfhost", "ch", "CORNFLAKES_REQUIRE_NETNS");

    #[test]
    fn names_fit_and_addresses_follow_the_suite() {
        let v = HostVeth::named(&SUITE, 99_999, 99_999, 1);
        assert!(v.server_if.len() <= MAX_IFNAME, "{}", v.server_if);
        assert_eq!(v.name, "cfhost-99999x99999");
        assert_eq!(
            (v.server_if.as_str(), v.client_if.as_str()),
            ("ch99999x99999s", "ch99999x99999c")
        );
        assert_eq!(v.server_ip, Ipv4Addr::new(10, 72, 1, 1));
        assert_eq!(v.client_ip, Ipv4Addr::new(10, 72, 1, 2));
        // Nothing was created: skip Drop's `ip netns del`, without leaking the names
        // (LeakSanitizer runs these tests).
        let mut v = v;
        for name in [&mut v.name, &mut v.server_if, &mut v.client_if] {
            drop(std::mem::take(name));
        }
        std::mem::forget(v);
    }

    #[test]
    fn each_queue_runs_on_its_own_cpu() {
        let cpus = percore::allowed_cores().unwrap();
        let on = on_queue_cpus(&cpus, |q| (q, percore::allowed_cores().unwrap())).unwrap();
        let want: Vec<_> = cpus
            .iter()
            .enumerate()
            .map(|(q, &c)| (q, vec![c]))
            .collect();
        assert_eq!(on, want);
        let e = on_queue_cpus(&[usize::MAX >> 1], |_| ()).unwrap_err();
        assert!(e.to_string().contains("pinning queue 0's thread"), "{e}");
    }

    #[test]
    fn peers_format_and_parse() {
        let mac = [0x02, 0xab, 0, 1, 0x10, 0xff];
        assert_eq!(format_mac(mac), "02:ab:00:01:10:ff");
        let (ip, m) = parse_peer("10.1.2.3=02:ab:00:01:10:ff").unwrap();
        assert_eq!((ip, m), (Ipv4Addr::new(10, 1, 2, 3), mac));
        assert!(parse_peer("10.1.2.3").unwrap_err().contains("IP=MAC"));
        assert!(parse_peer("10.1.2=02:ab:00:01:10:ff").is_err());
        assert!(parse_peer("10.1.2.3=02:ab").is_err());
    }

    #[test]
    fn a_child_server_runs_in_the_namespace_and_the_namespace_goes() {
        if let Some(why) = SUITE.skip_reason() {
            SUITE.skip(
                "a_child_server_runs_in_the_namespace_and_the_namespace_goes",
                &why,
            );
            return;
        }
        let v = HostVeth::create(&SUITE, 1500).expect("namespace and veth");
        let name = v.name.clone();
        // `sh -c` stands in for a server: it prints where it runs, then the ready line, and
        // waits for stdin to close. The shared flags land in "$@".
        let script =
            "ip -o link show \"$4\" >&2 || exit 3; echo '[server] ready' >&2; cat >/dev/null; \
                      echo \"done $@\" >&2";
        let args = ["-c".to_owned(), script.to_owned(), "sh".to_owned()];
        let s = ChildServer::spawn(
            &v,
            Path::new("/bin/sh"),
            &args,
            7000,
            "[server] ready",
            Duration::from_secs(10),
        )
        .expect("child up");
        assert_eq!(s.addr, SocketAddrV4::new(v.server_ip, 7000));
        let lines = s.stop().expect("child exits cleanly");
        let done = lines
            .iter()
            .find(|l| l.starts_with("done"))
            .expect("done line");
        assert!(done.contains(&format!("--peer {}", v.peer_arg())), "{done}");
        drop(v);
        assert!(
            !crate::namespace_exists(&name).unwrap(),
            "{name} left behind"
        );
    }
}
