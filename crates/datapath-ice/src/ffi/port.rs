//! Ethernet ports: capabilities, configuration with one RX and one TX queue, start/stop, and
//! registering pinned memory for DMA.

use std::ffi::CStr;
use std::os::raw::c_char;

use cornflakes_stack::MacAddr;

use super::eal::DpdkError;
use super::mbuf::Mempool;
use super::sys;

/// The generic device behind a port (`rte_device *`), for DMA mapping. Only ever passed back
/// to DPDK.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceHandle(usize);

/// What a port reports about itself (`rte_eth_dev_info` and its MAC address).
#[derive(Clone, Debug)]
pub struct PortInfo {
    /// Port id.
    pub port: u16,
    /// Driver name, e.g. `net_ice`, `net_ring`, `net_af_packet`.
    pub driver: String,
    /// The port's MAC address.
    pub mac: MacAddr,
    /// `tx_desc_lim.nb_seg_max` (0 = not reported).
    pub nb_seg_max: u16,
    /// `tx_desc_lim.nb_mtu_seg_max` (0 = not reported).
    pub nb_mtu_seg_max: u16,
    /// Most TX / RX descriptors per queue.
    pub tx_desc_max: u16,
    /// See `tx_desc_max`.
    pub rx_desc_max: u16,
    /// Largest MTU.
    pub max_mtu: u16,
    /// Offered TX offloads (`RTE_ETH_TX_OFFLOAD_*` bits).
    pub tx_offload_capa: u64,
    /// Offered RX offloads.
    pub rx_offload_capa: u64,
    /// The device, for [`register_memory`].
    pub device: DeviceHandle,
}

/// Offload bits, read from DPDK's headers through the shim.
#[derive(Clone, Copy, Debug)]
pub struct OffloadBits {
    /// `RTE_ETH_TX_OFFLOAD_IPV4_CKSUM`.
    pub tx_ipv4_cksum: u64,
    /// `RTE_ETH_TX_OFFLOAD_UDP_CKSUM`.
    pub tx_udp_cksum: u64,
    /// `RTE_ETH_TX_OFFLOAD_MULTI_SEGS`.
    pub tx_multi_segs: u64,
    /// `RTE_ETH_RX_OFFLOAD_IPV4_CKSUM`.
    pub rx_ipv4_cksum: u64,
    /// `RTE_ETH_RX_OFFLOAD_UDP_CKSUM`.
    pub rx_udp_cksum: u64,
}

impl OffloadBits {
    /// The values of this DPDK build.
    pub fn get() -> OffloadBits {
        // SAFETY: the shim functions return constants.
        unsafe {
            OffloadBits {
                tx_ipv4_cksum: sys::cf_tx_offload_ipv4_cksum(),
                tx_udp_cksum: sys::cf_tx_offload_udp_cksum(),
                tx_multi_segs: sys::cf_tx_offload_multi_segs(),
                rx_ipv4_cksum: sys::cf_rx_offload_ipv4_cksum(),
                rx_udp_cksum: sys::cf_rx_offload_udp_cksum(),
            }
        }
    }
}

/// Reads a port's capabilities.
pub fn info(port: u16) -> Result<PortInfo, DpdkError> {
    let mut i = sys::cf_port_info::default();
    // SAFETY: `i` is a valid out-pointer for the call.
    let ret = unsafe { sys::cf_port_info(port, &mut i) };
    if ret != 0 {
        return Err(DpdkError::new(format!("rte_eth_dev_info_get({port})"), ret));
    }
    // SAFETY: the shim NUL-terminates `driver_name` (strncpy into a zeroed array of 64 bytes,
    // copying at most 63).
    let driver = unsafe { CStr::from_ptr(i.driver_name.as_ptr() as *const c_char) }
        .to_string_lossy()
        .into_owned();
    Ok(PortInfo {
        port,
        driver,
        mac: MacAddr(i.mac),
        nb_seg_max: i.nb_seg_max,
        nb_mtu_seg_max: i.nb_mtu_seg_max,
        tx_desc_max: i.tx_desc_max,
        rx_desc_max: i.rx_desc_max,
        max_mtu: i.max_mtu,
        tx_offload_capa: i.tx_offload_capa,
        rx_offload_capa: i.rx_offload_capa,
        device: DeviceHandle(i.device as usize),
    })
}

/// Configures one RX and one TX queue with the given offloads and MTU, and sets the queues up
/// (`rx_pool` supplies receive buffers). The port must be stopped.
pub fn configure(
    port: u16,
    tx_offloads: u64,
    rx_offloads: u64,
    mtu: u16,
    rx_descs: u16,
    tx_descs: u16,
    rx_pool: &Mempool,
) -> Result<(), DpdkError> {
    // SAFETY: plain values; the port id is checked by DPDK.
    let ret = unsafe { sys::cf_port_configure(port, tx_offloads, rx_offloads, mtu) };
    if ret != 0 {
        return Err(DpdkError::new(
            format!("rte_eth_dev_configure({port})"),
            ret,
        ));
    }
    // SAFETY: `rx_pool` is live; the caller keeps it alive until the port is stopped and
    // closed (the datapath drops its pools last).
    let ret = unsafe { sys::cf_port_setup_queues(port, rx_descs, tx_descs, rx_pool.as_ptr()) };
    if ret != 0 {
        return Err(DpdkError::new(format!("queue setup on port {port}"), ret));
    }
    Ok(())
}

/// Configures `queues` RX and TX queues (one pair per server core) with the given offloads and
/// MTU. The port must be stopped; each queue is then set up with [`setup_queue`].
pub fn configure_queues(
    port: u16,
    queues: u16,
    tx_offloads: u64,
    rx_offloads: u64,
    mtu: u16,
) -> Result<(), DpdkError> {
    // SAFETY: plain values; the port id is checked by DPDK.
    let ret = unsafe { sys::cf_port_configure_queues(port, queues, tx_offloads, rx_offloads, mtu) };
    if ret != 0 {
        return Err(DpdkError::new(
            format!("rte_eth_dev_configure({port}, {queues} queues)"),
            ret,
        ));
    }
    Ok(())
}

/// Sets up RX and TX queue `queue` of a port configured by [`configure_queues`], receive
/// buffers from `rx_pool`. Setups of different queues must not run concurrently (DPDK's
/// control path is not thread-safe); the caller serializes them.
pub fn setup_queue(
    port: u16,
    queue: u16,
    rx_descs: u16,
    tx_descs: u16,
    rx_pool: &Mempool,
) -> Result<(), DpdkError> {
    // SAFETY: `rx_pool` is live; the caller keeps it alive until the queue is stopped (or the
    // port is stopped) and the port closed.
    let ret =
        unsafe { sys::cf_port_setup_queue(port, queue, rx_descs, tx_descs, rx_pool.as_ptr()) };
    if ret != 0 {
        return Err(DpdkError::new(
            format!("setting up queue {queue} of port {port}"),
            ret,
        ));
    }
    Ok(())
}

/// Stops RX and TX queue `queue` of a started port (no more DMA into its buffers). Fails
/// with `ENOTSUP` when the PMD cannot stop single queues (`net_ring`, `net_af_packet`).
pub fn stop_queue(port: u16, queue: u16) -> Result<(), DpdkError> {
    // SAFETY: plain values.
    let ret = unsafe { sys::cf_port_stop_queue(port, queue) };
    if ret != 0 {
        return Err(DpdkError::new(
            format!("stopping queue {queue} of port {port}"),
            ret,
        ));
    }
    Ok(())
}

/// An `rte_flow` rule of a port: IPv4/UDP to one destination port goes to one RX queue.
/// Destroyed on drop (before the port is closed).
#[derive(Debug)]
pub struct UdpFlow {
    port: u16,
    flow: std::ptr::NonNull<libc::c_void>,
}

impl UdpFlow {
    /// Installs the rule on a configured port. PMDs without `rte_flow` (the virtual devices)
    /// fail with `ENOTSUP` or `ENOSYS`; the error carries the PMD's message.
    pub fn create(port: u16, udp_dst: u16, queue: u16) -> Result<UdpFlow, DpdkError> {
        let mut err: libc::c_int = 0;
        let mut msg = [0 as c_char; 256];
        // SAFETY: `err` and `msg` are valid out-buffers of the sizes passed.
        let f = unsafe {
            sys::cf_flow_udp_dst_to_queue(
                port,
                udp_dst,
                queue,
                &mut err,
                msg.as_mut_ptr(),
                msg.len(),
            )
        };
        match std::ptr::NonNull::new(f) {
            Some(flow) => Ok(UdpFlow { port, flow }),
            None => {
                // SAFETY: the shim NUL-terminates `msg` (snprintf into the whole buffer).
                let m = unsafe { CStr::from_ptr(msg.as_ptr()) }.to_string_lossy();
                Err(DpdkError::new(
                    format!(
                        "rte_flow_create(port {port}: UDP dst {udp_dst} -> queue {queue}): {m}"
                    ),
                    err,
                ))
            }
        }
    }
}

// SAFETY: the handle is only passed back to DPDK's control path (destroy), by whichever thread
// owns the value; DPDK flow handles are not tied to the thread that created them.
unsafe impl Send for UdpFlow {}

impl Drop for UdpFlow {
    fn drop(&mut self) {
        // SAFETY: created by `create` on this port, destroyed once; the port is not closed yet
        // (its owner drops the flows first).
        unsafe { sys::cf_flow_destroy(self.port, self.flow.as_ptr()) };
    }
}

/// Starts the port (and enables promiscuous mode when asked: needed when the port's MAC
/// address is not the one peers send to, e.g. a veth end whose kernel MAC differs).
pub fn start(port: u16, promiscuous: bool) -> Result<(), DpdkError> {
    // SAFETY: plain port id.
    let ret = unsafe { sys::rte_eth_dev_start(port) };
    if ret != 0 {
        return Err(DpdkError::new(format!("rte_eth_dev_start({port})"), ret));
    }
    if promiscuous {
        // SAFETY: plain port id.
        let ret = unsafe { sys::rte_eth_promiscuous_enable(port) };
        if ret != 0 && ret != -libc::ENOTSUP {
            return Err(DpdkError::new(format!("promiscuous mode on {port}"), ret));
        }
    }
    Ok(())
}

/// Stops the port (no more DMA; descriptors stay until close).
pub fn stop(port: u16) {
    // SAFETY: plain port id; stopping a stopped port is harmless.
    unsafe { sys::rte_eth_dev_stop(port) };
}

/// Closes the port, releasing its queues (and the mbufs still in them).
pub fn close(port: u16) {
    // SAFETY: plain port id; the caller owns the port and has stopped it.
    unsafe { sys::rte_eth_dev_close(port) };
}

/// Asks the PMD to free transmitted mbufs now (`rte_eth_tx_done_cleanup`). Returns how many
/// it freed; 0 when the PMD does not support it (then it frees them as the ring wraps).
pub fn tx_done_cleanup(port: u16) -> usize {
    tx_done_cleanup_queue(port, 0)
}

/// As [`tx_done_cleanup`], for TX queue `queue`.
pub fn tx_done_cleanup_queue(port: u16, queue: u16) -> usize {
    // SAFETY: plain arguments.
    let r = unsafe { sys::rte_eth_tx_done_cleanup(port, queue, 0) };
    usize::try_from(r).unwrap_or(0)
}

/// Receive attempts the port dropped for lack of mbufs (`rx_nombuf`).
pub fn rx_nombuf(port: u16) -> u64 {
    // SAFETY: plain port id.
    unsafe { sys::cf_port_rx_nombuf(port) }
}

/// Registers `len` bytes at `base` (pages of `page_size` bytes, `base` aligned to it) as
/// external memory with DPDK, with IOVA = virtual address, and maps it for DMA by `device`.
/// Returns the IOVA of `base`. Virtual devices need no mapping (`ENOTSUP` is not an error).
///
/// # Safety
/// `base..base+len` must stay mapped until [`unregister_memory`] is called for it.
pub unsafe fn register_memory(
    device: DeviceHandle,
    base: *mut u8,
    len: usize,
    page_size: usize,
) -> Result<u64, DpdkError> {
    if !super::eal::iova_is_va() {
        return Err(DpdkError::new(
            "registering pinned memory: the EAL runs with IOVA as physical addresses; \
             datapath-ice needs --iova-mode=va (vfio-pci with the IOMMU on)",
            libc::ENOTSUP,
        ));
    }
    let pages = len / page_size;
    let mut iovas: Vec<u64> = (0..pages)
        .map(|i| base as u64 + (i * page_size) as u64)
        .collect();
    // SAFETY: the caller keeps the range mapped; `iovas` has one entry per page and DPDK copies
    // it during the call.
    let ret = unsafe {
        sys::rte_extmem_register(
            base.cast(),
            len,
            iovas.as_mut_ptr(),
            pages as u32,
            page_size,
        )
    };
    if ret != 0 {
        return Err(DpdkError::last(format!(
            "rte_extmem_register({base:p}, {len})"
        )));
    }
    let iova = base as u64;
    // SAFETY: the range is registered; `device` came from `info`.
    let ret =
        unsafe { sys::rte_dev_dma_map(device.0 as *mut sys::rte_device, base.cast(), iova, len) };
    if ret != 0 {
        // SAFETY: reads rte_errno.
        let e = unsafe { sys::cf_errno() };
        if e != libc::ENOTSUP {
            // SAFETY: registered just above, used by nothing yet.
            unsafe { sys::rte_extmem_unregister(base.cast(), len) };
            return Err(DpdkError::new(
                format!("rte_dev_dma_map({base:p}, {len})"),
                e,
            ));
        }
    }
    Ok(iova)
}

/// Undoes [`register_memory`].
///
/// # Safety
/// No mbuf or descriptor may still refer to the range.
pub unsafe fn unregister_memory(device: DeviceHandle, base: *mut u8, len: usize) {
    // SAFETY: the caller guarantees nothing uses the mapping; errors (e.g. ENOTSUP for a
    // virtual device that was never mapped) leave nothing to undo.
    unsafe {
        sys::rte_dev_dma_unmap(
            device.0 as *mut sys::rte_device,
            base.cast(),
            base as u64,
            len,
        );
        sys::rte_extmem_unregister(base.cast(), len);
    }
}
