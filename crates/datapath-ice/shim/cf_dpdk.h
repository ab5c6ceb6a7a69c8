/* C shim over DPDK 22.11 for datapath-ice: wrappers for the `static inline` fast-path
 * functions (which have no symbol to link against), thread-local rte_errno, and the few setup
 * calls whose argument structs are large unions (rte_eth_conf). Everything else is bound
 * directly by bindgen. */
#ifndef CF_DPDK_H
#define CF_DPDK_H

#include <stdint.h>
#include <stddef.h>

#include <rte_config.h>
#include <rte_errno.h>
#include <rte_eal.h>
#include <rte_dev.h>
#include <rte_memory.h>
#include <rte_mempool.h>
#include <rte_mbuf.h>
#include <rte_ethdev.h>
#include <rte_ring.h>
#include <rte_eth_ring.h>
#include <rte_flow.h>

/* What datapath-ice needs to know about a port. */
struct cf_port_info {
	uint8_t mac[6];
	uint16_t nb_seg_max;      /* tx_desc_lim.nb_seg_max (0 = not reported) */
	uint16_t nb_mtu_seg_max;  /* tx_desc_lim.nb_mtu_seg_max (0 = not reported) */
	uint16_t tx_desc_max;
	uint16_t rx_desc_max;
	uint16_t max_mtu;
	uint32_t max_rx_pktlen;
	uint64_t tx_offload_capa;
	uint64_t rx_offload_capa;
	struct rte_device *device;
	char driver_name[64];
};

/* TX offload capability bits (the RTE_ETH_TX_OFFLOAD_* macros are not constants bindgen sees). */
uint64_t cf_tx_offload_ipv4_cksum(void);
uint64_t cf_tx_offload_udp_cksum(void);
uint64_t cf_tx_offload_multi_segs(void);
uint64_t cf_rx_offload_ipv4_cksum(void);
uint64_t cf_rx_offload_udp_cksum(void);

int cf_errno(void);
int cf_port_info(uint16_t port, struct cf_port_info *out);
/* One RX and one TX queue; returns 0 or a negative errno. */
int cf_port_configure(uint16_t port, uint64_t tx_offloads, uint64_t rx_offloads, uint16_t mtu);
int cf_port_setup_queues(uint16_t port, uint16_t nb_rxd, uint16_t nb_txd, struct rte_mempool *rx_pool);
/* `nb_queues` RX and TX queues (one pair per server core); returns 0 or a negative errno. */
int cf_port_configure_queues(uint16_t port, uint16_t nb_queues, uint64_t tx_offloads,
			     uint64_t rx_offloads, uint16_t mtu);
/* Sets up RX and TX queue `queue` (receive buffers from `rx_pool`). */
int cf_port_setup_queue(uint16_t port, uint16_t queue, uint16_t nb_rxd, uint16_t nb_txd,
			struct rte_mempool *rx_pool);
/* Stops RX and TX queue `queue` of a started port; 0 or a negative errno (-ENOTSUP when the
 * PMD cannot stop single queues). */
int cf_port_stop_queue(uint16_t port, uint16_t queue);
/* rte_flow: IPv4/UDP with destination port `udp_dst` to RX queue `queue`. Returns the flow, or
 * NULL with the errno in *err and the PMD's message in msg. */
void *cf_flow_udp_dst_to_queue(uint16_t port, uint16_t udp_dst, uint16_t queue, int *err,
			       char *msg, size_t msg_len);
int cf_flow_destroy(uint16_t port, void *flow);
uint64_t cf_port_rx_nombuf(uint16_t port);

struct rte_mbuf *cf_pktmbuf_alloc(struct rte_mempool *mp);
void cf_pktmbuf_free(struct rte_mbuf *m);
int cf_pktmbuf_chain(struct rte_mbuf *head, struct rte_mbuf *tail);
/* Attaches `len` bytes at `addr` (IO address `iova`) as the mbuf's external data buffer, with
 * `shinfo` (refcount set to 1) telling DPDK what to call when the last mbuf using it is freed;
 * the mbuf's data then covers the whole buffer. */
void cf_attach_extbuf(struct rte_mbuf *m, void *addr, uint64_t iova, uint16_t len,
		      struct rte_mbuf_ext_shared_info *shinfo);
/* Requests IPv4 header and UDP checksum offload for a frame whose head this is. */
void cf_set_tx_cksum_offload(struct rte_mbuf *m, uint16_t l2_len, uint16_t l3_len);

/* Dequeues and frees every mbuf left in `r` (a ring port's queue); returns how many. */
unsigned int cf_ring_drain(struct rte_ring *r);

uint16_t cf_tx_burst(uint16_t port, uint16_t queue, struct rte_mbuf **pkts, uint16_t n);
uint16_t cf_rx_burst(uint16_t port, uint16_t queue, struct rte_mbuf **pkts, uint16_t n);

/* Everything the receive path reads from a received mbuf, in one call. */
struct cf_rx_info {
	void *buf_addr;
	struct rte_mempool *pool;
	uint32_t pkt_len;
	uint16_t data_off;
	uint16_t data_len;
	uint16_t nb_segs;
	int8_t ip_cksum; /* 1 good, -1 bad, 0 unknown */
	int8_t l4_cksum; /* likewise */
};
void cf_mbuf_rx_info(const struct rte_mbuf *m, struct cf_rx_info *out);

void *cf_mbuf_data(const struct rte_mbuf *m);
uint16_t cf_mbuf_data_len(const struct rte_mbuf *m);
uint32_t cf_mbuf_pkt_len(const struct rte_mbuf *m);
uint16_t cf_mbuf_nb_segs(const struct rte_mbuf *m);
struct rte_mbuf *cf_mbuf_next(const struct rte_mbuf *m);
/* 1 when the mbuf requests IPv4 header and UDP checksum offload (with l2/l3 lengths stored in
 * *l2 / *l3), else 0. */
int cf_mbuf_tx_cksum_offload(const struct rte_mbuf *m, uint16_t *l2, uint16_t *l3);
/* 1 when the IPv4 / L4 checksum is known good (RTE_MBUF_F_RX_*_CKSUM_GOOD), -1 when known bad,
 * 0 when unknown. */
int cf_mbuf_rx_ip_cksum(const struct rte_mbuf *m);
int cf_mbuf_rx_l4_cksum(const struct rte_mbuf *m);

#endif
