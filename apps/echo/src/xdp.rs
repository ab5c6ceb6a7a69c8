//! Running the echo server over AF_XDP (feature `xdp`, needs root): a network namespace with
//! one end of a veth pair, where the server's XDP datapath runs, and the other end in this
//! namespace, where the benchmark's clients use kernel UDP sockets.
//!
//! A thread cannot enter a namespace without `setns(2)`, and this crate has no `unsafe`, so
//! the server runs as a child process under `ip netns exec` (`echo server --datapath xdp`).

use std::io::{self, BufRead, BufReader, Write as _};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use cornflakes_stack::wire::MacAddr;
use datapath_xdp::{XdpConfig, XdpDatapath};

use crate::server::{EchoServer, ServerConfig, ServerStats};

/// Creates an [`XdpDatapath`] on `ifname` for `addr`, with a static ARP entry for the peer
/// (so the first replies need not wait for address resolution).
pub fn datapath(
    ifname: &str,
    addr: SocketAddrV4,
    peer: Option<(Ipv4Addr, MacAddr)>,
) -> io::Result<XdpDatapath> {
    let mut cfg = XdpConfig::new(ifname, addr);
    cfg.static_arp.extend(peer);
    XdpDatapath::new(cfg)
}

/// [`datapath`] with a UMEM of `umem_bytes` (e.g. to hold the calibration's array).
pub fn datapath_with_umem(
    ifname: &str,
    addr: SocketAddrV4,
    peer: Option<(Ipv4Addr, MacAddr)>,
    umem_bytes: usize,
) -> io::Result<XdpDatapath> {
    let mut cfg = XdpConfig::new(ifname, addr);
    cfg.static_arp.extend(peer);
    cfg.umem_bytes = umem_bytes;
    XdpDatapath::new(cfg)
}

/// An echo server over an [`XdpDatapath`].
pub fn server(
    ifname: &str,
    addr: SocketAddrV4,
    peer: Option<(Ipv4Addr, MacAddr)>,
    cfg: ServerConfig,
) -> Result<EchoServer<XdpDatapath>, String> {
    let dp = datapath(ifname, addr, peer).map_err(|e| format!("AF_XDP on {ifname}: {e}"))?;
    EchoServer::new(dp, cfg)
}

fn ip(args: &[&str]) -> Result<String, String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("running ip: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Parses `aa:bb:cc:dd:ee:ff`.
pub fn parse_mac(s: &str) -> Option<MacAddr> {
    let mut mac = [0u8; 6];
    let mut parts = s.split(':');
    for m in &mut mac {
        *m = u8::from_str_radix(parts.next()?, 16).ok()?;
    }
    parts.next().is_none().then_some(MacAddr(mac))
}

fn mac_of(netns: Option<&str>, ifname: &str) -> Result<MacAddr, String> {
    let out = match netns {
        Some(ns) => ip(&["-n", ns, "-o", "link", "show", ifname])?,
        None => ip(&["-o", "link", "show", ifname])?,
    };
    out.split("link/ether ")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .and_then(parse_mac)
        .ok_or_else(|| format!("no MAC address for {ifname} in `{}`", out.trim()))
}

/// A namespace holding the server end (`server_if`) of a veth pair whose client end
/// (`client_if`) stays in this namespace. Dropping it deletes the namespace and the pair.
#[derive(Debug)]
pub struct Netns {
    /// Namespace name.
    pub name: String,
    /// Interface in the namespace (the XDP server's).
    pub server_if: String,
    /// Interface here (the clients').
    pub client_if: String,
    /// Address the server answers on (not configured in the kernel: XDP takes its traffic).
    pub server_ip: Ipv4Addr,
    /// The clients' address.
    pub client_ip: Ipv4Addr,
    /// MAC address of `client_if`.
    pub client_mac: MacAddr,
}

impl Netns {
    /// Creates the namespace and the veth pair with `mtu` on both ends.
    pub fn create(mtu: usize) -> Result<Netns, String> {
        let pid = std::process::id() % 100_000;
        let subnet = (pid % 250 + 1) as u8;
        let mut ns = Netns {
            name: format!("cfecho-{pid}"),
            server_if: format!("cfe{pid}s"),
            client_if: format!("cfe{pid}c"),
            server_ip: Ipv4Addr::new(10, 78, subnet, 1),
            client_ip: Ipv4Addr::new(10, 78, subnet, 2),
            client_mac: MacAddr([0; 6]),
        };
        ip(&["netns", "add", &ns.name])?;
        // From here on, Drop cleans up.
        let mtu = mtu.to_string();
        ip(&[
            "link",
            "add",
            "name",
            &ns.client_if,
            "type",
            "veth",
            "peer",
            "name",
            &ns.server_if,
            "netns",
            &ns.name,
        ])?;
        ip(&["-n", &ns.name, "link", "set", "lo", "up"])?;
        ip(&[
            "-n",
            &ns.name,
            "link",
            "set",
            &ns.server_if,
            "mtu",
            &mtu,
            "up",
        ])?;
        ip(&["link", "set", &ns.client_if, "mtu", &mtu, "up"])?;
        ip(&[
            "addr",
            "add",
            &format!("{}/24", ns.client_ip),
            "dev",
            &ns.client_if,
        ])?;
        // veth passes the kernel's partial (offloaded) UDP checksums on to XDP; have the
        // client side compute them in software, as packets from a real link would carry.
        let st = Command::new("ethtool")
            .args(["-K", &ns.client_if, "tx", "off"])
            .output()
            .map_err(|e| format!("running ethtool: {e}"))?;
        if !st.status.success() {
            return Err(format!(
                "ethtool -K {} tx off: {}",
                ns.client_if,
                String::from_utf8_lossy(&st.stderr).trim()
            ));
        }
        ns.client_mac = mac_of(None, &ns.client_if)?;
        Ok(ns)
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        // Deleting the namespace destroys the veth end inside it, and with it the pair.
        let _ = ip(&["netns", "del", &self.name]);
    }
}

/// An `echo server --datapath xdp` child process inside a [`Netns`].
pub struct ServerProcess {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<String>,
    /// Where it listens.
    pub addr: SocketAddrV4,
}

/// The line the server prints once its datapath is up.
pub const READY: &str = "[server] ready";

impl ServerProcess {
    /// Starts this executable as a server of `cfg` in `ns`, port `port`, and waits until it
    /// is ready. It stops when its standard input closes ([`Self::stop`]).
    pub fn spawn(ns: &Netns, cfg: ServerConfig, port: u16) -> Result<ServerProcess, String> {
        let args = [
            "server",
            "--mode",
            cfg.mode.name(),
            "--threshold",
            &cfg.threshold.to_string(),
        ]
        .map(str::to_owned);
        Self::spawn_args(ns, port, &args)
    }

    /// Starts this executable with `args` (a server subcommand and its own flags) plus the
    /// AF_XDP flags in `ns`, port `port`, and waits until it prints [`READY`].
    pub fn spawn_args(ns: &Netns, port: u16, args: &[String]) -> Result<ServerProcess, String> {
        let exe = std::env::current_exe().map_err(|e| format!("own executable: {e}"))?;
        let addr = SocketAddrV4::new(ns.server_ip, port);
        let mac = ns.client_mac.0;
        let mac = format!(
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            mac[0], mac[1], mac[2], mac[3], mac[4], mac[5]
        );
        let mut child = Command::new("ip")
            .args(["netns", "exec", &ns.name])
            .arg(exe)
            .args(args)
            .args(["--datapath", "xdp", "--ifname", &ns.server_if])
            .args(["--bind", &addr.to_string()])
            .args([
                "--peer",
                &format!("{}={mac}", ns.client_ip),
                "--until-stdin-closes",
            ])
            .stdin(Stdio::piped())
            .stderr(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .map_err(|e| format!("starting the XDP server: {e}"))?;
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
        let mut p = ServerProcess {
            child,
            stdin,
            lines,
            addr,
        };
        loop {
            match p.lines.recv_timeout(Duration::from_secs(30)) {
                Ok(l) if l.starts_with(READY) => return Ok(p),
                Ok(_) => continue,
                Err(_) => {
                    let _ = p.child.kill();
                    let _ = p.child.wait();
                    return Err("the XDP server did not come up (see its output above)".into());
                }
            }
        }
    }

    /// Closes the server's standard input, waits for it to exit and returns the counters it
    /// printed last (malformed count and median handling time).
    pub fn stop(mut self) -> Result<ServerStats, String> {
        if let Some(mut s) = self.stdin.take() {
            let _ = s.flush();
        }
        let status = self
            .child
            .wait()
            .map_err(|e| format!("waiting for the server: {e}"))?;
        let mut stats = ServerStats::default();
        // The reader thread ends (and the channel closes) at the child's end of output.
        for line in self.lines.iter() {
            if let Some(done) = line.split(" done: ").nth(1) {
                for kv in done.split_whitespace() {
                    let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
                    let n = || v.trim_end_matches("ns").parse::<u64>().unwrap_or(0);
                    match k {
                        "received" => stats.received = n(),
                        "echoed" => stats.echoed = n(),
                        "malformed" => stats.malformed = n(),
                        "send_failed" => stats.send_failed = n(),
                        // Only the median crossed the process boundary: one sample of it.
                        "work_p50" => stats.work.record(Duration::from_nanos(n())),
                        _ => {}
                    }
                }
            }
        }
        if !status.success() {
            return Err(format!("the XDP server exited with {status}"));
        }
        Ok(stats)
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        // Only reached without `stop` (an error path): do not leave the child behind.
        if self.stdin.is_some() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
