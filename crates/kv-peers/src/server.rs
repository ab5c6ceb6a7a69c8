//! Starting `redis-server` and `memcached` on 127.0.0.1 and stopping them again.
//!
//! Each server runs under a small `sh` watchdog whose stdin is a pipe from this process: the
//! watchdog kills the server as soon as the pipe closes, which happens when the
//! [`ServerProcess`] is dropped (normal exit, error, panic) and also when this process dies
//! by a signal, since the kernel closes its pipes. No server outlives the tool.

use std::fmt;
use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

/// Which peer system.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Peer {
    /// `redis-server` (RESP).
    Redis,
    /// `memcached` (text protocol).
    Memcached,
}

impl Peer {
    /// The server binary's name.
    pub fn binary(self) -> &'static str {
        match self {
            Peer::Redis => "redis-server",
            Peer::Memcached => "memcached",
        }
    }

    /// The label of this system in records and tables: which server, over what.
    pub fn label(self) -> &'static str {
        match self {
            Peer::Redis => "redis-server (TCP, RESP)",
            Peer::Memcached => "memcached (TCP, text)",
        }
    }
}

impl std::str::FromStr for Peer {
    type Err = String;
    fn from_str(s: &str) -> Result<Peer, String> {
        match s {
            "redis" | "redis-server" => Ok(Peer::Redis),
            "memcached" => Ok(Peer::Memcached),
            other => Err(format!(
                "unknown peer {other:?} (expected redis or memcached)"
            )),
        }
    }
}

/// How to start a server.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerConfig {
    /// Memory limit for memcached (`-m`, MiB); redis runs without `maxmemory`.
    pub memory_mib: u64,
    /// memcached worker threads (`-t`); redis is single-threaded for commands.
    pub memcached_threads: usize,
    /// How long to wait for the server to answer.
    pub start_timeout: Duration,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            memory_mib: 1024,
            memcached_threads: 1,
            start_timeout: Duration::from_secs(10),
        }
    }
}

/// Why a server could not be started.
#[derive(Debug)]
pub enum StartError {
    /// The binary is not on `PATH`.
    NotInstalled(&'static str),
    /// It did not start or did not answer in time; the string says what happened.
    Failed(String),
}

impl fmt::Display for StartError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StartError::NotInstalled(b) => write!(
                f,
                "{b} is not installed (apt-get install redis-server memcached; see crates/kv-peers/APT_PACKAGES)"
            ),
            StartError::Failed(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for StartError {}

/// Finds `name` on `PATH`.
pub fn find_binary(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// A running server; dropping it stops the server and waits for it.
pub struct ServerProcess {
    peer: Peer,
    addr: SocketAddr,
    watchdog: Child,
    stdin: Option<ChildStdin>,
    dir: PathBuf,
    version: String,
}

fn free_port() -> io::Result<u16> {
    Ok(
        TcpListener::bind(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0))?
            .local_addr()?
            .port(),
    )
}

fn running_as_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .map(|l| l.split_whitespace().nth(2) == Some("0"))
        })
        .unwrap_or(false)
}

impl ServerProcess {
    /// Starts `peer` on 127.0.0.1 on a free port and waits until it answers.
    pub fn start(peer: Peer, cfg: &ServerConfig) -> Result<ServerProcess, StartError> {
        let bin = find_binary(peer.binary()).ok_or(StartError::NotInstalled(peer.binary()))?;
        let mut last = String::new();
        // A port found free may be taken before the server binds it: try a few.
        for _ in 0..3 {
            let port = free_port().map_err(|e| StartError::Failed(format!("no free port: {e}")))?;
            match Self::start_on(peer, &bin, port, cfg) {
                Ok(s) => return Ok(s),
                Err(e) => last = e,
            }
        }
        Err(StartError::Failed(last))
    }

    fn start_on(
        peer: Peer,
        bin: &Path,
        port: u16,
        cfg: &ServerConfig,
    ) -> Result<ServerProcess, String> {
        let dir = std::env::temp_dir().join(format!(
            "kv-peers-{}-{}-{port}",
            peer.binary(),
            std::process::id()
        ));
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let mut args: Vec<String> = vec![bin.display().to_string()];
        match peer {
            Peer::Redis => args.extend(
                [
                    "--port",
                    &port.to_string(),
                    "--bind",
                    "127.0.0.1",
                    "--save",
                    "",
                    "--appendonly",
                    "no",
                    "--protected-mode",
                    "no",
                    "--daemonize",
                    "no",
                    "--dir",
                    &dir.display().to_string(),
                    "--logfile",
                    "",
                ]
                .map(String::from),
            ),
            Peer::Memcached => {
                args.extend(
                    [
                        "-l",
                        "127.0.0.1",
                        "-p",
                        &port.to_string(),
                        "-U",
                        "0",
                        "-m",
                        &cfg.memory_mib.to_string(),
                        "-t",
                        &cfg.memcached_threads.max(1).to_string(),
                        "-c",
                        "4096",
                    ]
                    .map(String::from),
                );
                if running_as_root() {
                    args.extend(["-u", "root"].map(String::from));
                }
            }
        }
        let log =
            std::fs::File::create(dir.join("server.log")).map_err(|e| format!("log file: {e}"))?;
        let log2 = log.try_clone().map_err(|e| format!("log file: {e}"))?;
        // The watchdog: run the server, and kill it once our end of stdin closes.
        let script =
            r#""$@" & pid=$!; trap 'kill $pid 2>/dev/null; wait $pid' EXIT; cat >/dev/null"#;
        let mut watchdog = Command::new("sh")
            .arg("-c")
            .arg(script)
            .arg("kv-peers-watchdog")
            .args(&args)
            .stdin(Stdio::piped())
            .stdout(log)
            .stderr(log2)
            .spawn()
            .map_err(|e| format!("starting {}: {e}", peer.binary()))?;
        let stdin = watchdog.stdin.take();
        let addr = SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, port));
        let mut server = ServerProcess {
            peer,
            addr,
            watchdog,
            stdin,
            dir,
            version: String::new(),
        };
        let deadline = Instant::now() + cfg.start_timeout;
        loop {
            if let Ok(Some(status)) = server.watchdog.try_wait() {
                return Err(format!(
                    "{} exited at start ({status}); its log: {}",
                    peer.binary(),
                    server.log().trim()
                ));
            }
            match server.hello() {
                Ok(v) => {
                    server.version = v;
                    return Ok(server);
                }
                Err(e) if Instant::now() > deadline => {
                    return Err(format!(
                        "{} did not answer on {} within {:?}: {e}; its log: {}",
                        peer.binary(),
                        server.addr,
                        cfg.start_timeout,
                        server.log().trim()
                    ))
                }
                Err(_) => std::thread::sleep(Duration::from_millis(20)),
            }
        }
    }

    /// Connects and asks for the version (`INFO server` / `version`).
    fn hello(&self) -> io::Result<String> {
        let mut s = TcpStream::connect_timeout(&self.addr, Duration::from_millis(200))?;
        s.set_read_timeout(Some(Duration::from_secs(2)))?;
        let (req, field): (&[u8], &str) = match self.peer {
            Peer::Redis => (b"*2\r\n$4\r\nINFO\r\n$6\r\nserver\r\n", "redis_version:"),
            Peer::Memcached => (b"version\r\n", "VERSION "),
        };
        s.write_all(req)?;
        let mut buf = Vec::new();
        let mut chunk = [0u8; 4096];
        loop {
            let n = s.read(&mut chunk)?;
            if n == 0 {
                return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "closed"));
            }
            buf.extend_from_slice(&chunk[..n]);
            let text = String::from_utf8_lossy(&buf);
            if let Some(i) = text.find(field) {
                if let Some(end) = text[i..].find("\r\n") {
                    return Ok(text[i + field.len()..i + end].to_owned());
                }
            }
            if buf.len() > 1 << 20 {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "no version in reply",
                ));
            }
        }
    }

    /// The server's address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Which system this is.
    pub fn peer(&self) -> Peer {
        self.peer
    }

    /// The version the server reported, e.g. `7.0.15` or `1.6.18`.
    pub fn version(&self) -> &str {
        &self.version
    }

    /// The server's output so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default()
    }

    /// Stops the server and waits for it (also done on drop).
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        // Closing the pipe makes the watchdog kill the server and exit.
        drop(self.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            match self.watchdog.try_wait() {
                Ok(Some(_)) | Err(_) => break,
                Ok(None) if Instant::now() > deadline => {
                    let _ = self.watchdog.kill();
                    let _ = self.watchdog.wait();
                    break;
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(10)),
            }
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        if self.stdin.is_some() {
            self.shutdown();
        }
    }
}
