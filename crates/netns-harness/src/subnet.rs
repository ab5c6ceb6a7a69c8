//! The one allocator of the test namespaces' subnets: every [`crate::VethPair`] and
//! [`crate::HostVeth`] of every suite, in every process, takes a `/24` of `10.72.0.0/13`
//! (`10.72.0.0` to `10.79.255.255`) through a [`Lease`], so two suites (or two runs of one)
//! at the same time never share a subnet. A [`HostVeth`](crate::HostVeth) puts its client
//! address in the host's own namespace, where two equal subnets would steal each other's
//! routes.
//!
//! A lease is an exclusive `flock(2)` on `/run/cornflakes-netns/<index>`: the kernel drops it
//! when the holder closes the file or dies, so a crashed test leaves nothing to clean up. The
//! search starts at a place derived from the process id and the pair's number
//! (64 subnets apart per process), so concurrent processes rarely even probe the same files.

use std::fs::{File, OpenOptions};
use std::io;
use std::net::Ipv4Addr;
use std::os::fd::AsRawFd;
use std::path::Path;

/// Where the lease files are (root only, like the namespaces themselves).
pub const LEASE_DIR: &str = "/run/cornflakes-netns";

/// The second octet of the range's first subnet: `10.72.0.0/13`.
const FIRST_OCTET: u8 = 72;

/// How many `/24`s the range holds (`/13`: 8 × 256).
pub const SUBNETS: u16 = 8 * 256;

/// A `/24` of `10.72.0.0/13` held by this process until dropped.
#[derive(Debug)]
pub struct Lease {
    index: u16,
    /// Holds the lock; closing it (on drop, or when the process ends) releases it.
    _file: File,
}

impl Lease {
    /// Leases a free subnet for pair number `n` of process `pid`.
    pub fn take(pid: u32, n: u32) -> io::Result<Lease> {
        Lease::take_in(Path::new(LEASE_DIR), first_choice(pid, n))
    }

    /// Leases the first free subnet from `start` on (wrapping), with lock files in `dir`.
    pub(crate) fn take_in(dir: &Path, start: u16) -> io::Result<Lease> {
        std::fs::create_dir_all(dir)
            .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", dir.display())))?;
        for i in 0..SUBNETS {
            let index = (start % SUBNETS + i) % SUBNETS;
            let path = dir.join(index.to_string());
            let file = OpenOptions::new()
                .create(true)
                .truncate(false)
                .write(true)
                .open(&path)
                .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
            // SAFETY: flock only reads the descriptor, which `file` keeps open for the call.
            if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
                return Ok(Lease { index, _file: file });
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::WouldBlock {
                return Err(io::Error::new(
                    e.kind(),
                    format!("locking {}: {e}", path.display()),
                ));
            }
        }
        Err(io::Error::other(format!(
            "all {SUBNETS} subnets of 10.72.0.0/13 are leased (lock files in {})",
            dir.display()
        )))
    }

    /// The subnet's index in the range (`0..SUBNETS`).
    pub fn index(&self) -> u16 {
        self.index
    }

    /// Address `host` of the subnet: `10.X.N.host`.
    pub fn ip(&self, host: u8) -> Ipv4Addr {
        subnet_ip(self.index, host)
    }
}

/// Address `host` of subnet `index` of the range.
pub(crate) fn subnet_ip(index: u16, host: u8) -> Ipv4Addr {
    let index = index % SUBNETS;
    Ipv4Addr::new(10, FIRST_OCTET + (index >> 8) as u8, index as u8, host)
}

/// Where the search for pair `n` of process `pid` starts: consecutive pairs of a process on
/// consecutive subnets, processes 64 subnets apart.
pub(crate) fn first_choice(pid: u32, n: u32) -> u16 {
    (pid.wrapping_mul(64).wrapping_add(n) % u32::from(SUBNETS)) as u16
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch() -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("netns-harness-leases-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn leases_are_exclusive_until_dropped() {
        let dir = scratch();
        let a = Lease::take_in(&dir, 5).unwrap();
        let b = Lease::take_in(&dir, 5).unwrap();
        let c = Lease::take_in(&dir, SUBNETS - 1).unwrap();
        let d = Lease::take_in(&dir, SUBNETS - 1).unwrap();
        assert_eq!((a.index(), b.index()), (5, 6));
        assert_eq!((c.index(), d.index()), (SUBNETS - 1, 0), "the search wraps");
        drop(a);
        // Released on drop. Not always at once: the other tests of this binary spawn processes
        // at the same time, and a child forked while `a` was open holds a copy of its
        // descriptor (and so the lock) until it calls exec, which closes it (the file is
        // opened close-on-exec). So the lease must come back within a few seconds, not
        // necessarily on the first try; until then the search passes it by (6 is `b`'s).
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        loop {
            let again = Lease::take_in(&dir, 5).unwrap();
            if again.index() == 5 {
                break;
            }
            assert!(
                again.index() > 6,
                "5 still held and 6 is b's: one after them"
            );
            assert!(
                std::time::Instant::now() < deadline,
                "subnet 5 still leased 5 s after its lease was dropped"
            );
            drop(again);
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        drop((b, c, d));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn addresses_cover_10_72_to_10_79() {
        assert_eq!(subnet_ip(0, 1), Ipv4Addr::new(10, 72, 0, 1));
        assert_eq!(subnet_ip(258, 2), Ipv4Addr::new(10, 73, 2, 2));
        assert_eq!(subnet_ip(SUBNETS - 1, 1), Ipv4Addr::new(10, 79, 255, 1));
        assert_eq!(first_choice(1, 0), 64);
        assert_eq!(first_choice(32, 3), 3, "32 * 64 wraps to 0");
        assert!(first_choice(u32::MAX, u32::MAX) < SUBNETS);
    }
}
