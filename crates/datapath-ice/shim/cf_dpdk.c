/* See cf_dpdk.h. */
#include <string.h>
#include <errno.h>
#include <stdio.h>

#include "cf_dpdk.h"

uint64_t cf_tx_offload_ipv4_cksum(void) { return RTE_ETH_TX_OFFLOAD_IPV4_CKSUM; }
uint64_t cf_tx_offload_udp_cksum(void) { return RTE_ETH_TX_OFFLOAD_UDP_CKSUM; }
uint64_t cf_tx_offload_multi_segs(void) { return RTE_ETH_TX_OFFLOAD_MULTI_SEGS; }
uint64_t cf_rx_offload_ipv4_cksum(void) { return RTE_ETH_RX_OFFLOAD_IPV4_CKSUM; }
uint64_t cf_rx_offload_udp_cksum(void) { return RTE_ETH_RX_OFFLOAD_UDP_CKSUM; }

int cf_errno(void) { return rte_errno; }

int cf_port_info(uint16_t port, struct cf_port_info *out)
{
	struct rte_eth_dev_info info;
	struct rte_ether_addr mac;
	int ret;

	memset(out, 0, sizeof(*out));
	ret = rte_eth_dev_info_get(port, &info);
	if (ret != 0)
		return ret;
	ret = rte_eth_macaddr_get(port, &mac);
	if (ret != 0)
		return ret;
	memcpy(out->mac, mac.addr_bytes, 6);
	out->nb_seg_max = info.tx_desc_lim.nb_seg_max;
	out->nb_mtu_seg_max = info.tx_desc_lim.nb_mtu_seg_max;
	out->tx_desc_max = info.tx_desc_lim.nb_max;
	out->rx_desc_max = info.rx_desc_lim.nb_max;
	out->max_mtu = info.max_mtu;
	out->max_rx_pktlen = info.max_rx_pktlen;
	out->tx_offload_capa = info.tx_offload_capa;
	out->rx_offload_capa = info.rx_offload_capa;
	out->device = info.device;
	if (info.driver_name != NULL) {
		strncpy(out->driver_name, info.driver_name, sizeof(out->driver_name) - 1);
	}
	return 0;
}

int cf_port_configure(uint16_t port, uint64_t tx_offloads, uint64_t rx_offloads, uint16_t mtu)
{
	return cf_port_configure_queues(port, 1, tx_offloads, rx_offloads, mtu);
}

int cf_port_configure_queues(uint16_t port, uint16_t nb_queues, uint64_t tx_offloads,
			     uint64_t rx_offloads, uint16_t mtu)
{
	struct rte_eth_conf conf;

	memset(&conf, 0, sizeof(conf));
	conf.rxmode.mtu = mtu;
	conf.rxmode.offloads = rx_offloads;
	conf.txmode.offloads = tx_offloads;
	return rte_eth_dev_configure(port, nb_queues, nb_queues, &conf);
}

int cf_port_setup_queues(uint16_t port, uint16_t nb_rxd, uint16_t nb_txd, struct rte_mempool *rx_pool)
{
	return cf_port_setup_queue(port, 0, nb_rxd, nb_txd, rx_pool);
}

int cf_port_setup_queue(uint16_t port, uint16_t queue, uint16_t nb_rxd, uint16_t nb_txd,
			struct rte_mempool *rx_pool)
{
	struct rte_eth_dev_info info;
	struct rte_eth_txconf txconf;
	struct rte_eth_rxconf rxconf;
	int socket = rte_eth_dev_socket_id(port);
	int ret;

	if (socket < 0)
		socket = (int)rte_socket_id();
	ret = rte_eth_dev_adjust_nb_rx_tx_desc(port, &nb_rxd, &nb_txd);
	if (ret != 0)
		return ret;
	ret = rte_eth_dev_info_get(port, &info);
	if (ret != 0)
		return ret;
	rxconf = info.default_rxconf;
	txconf = info.default_txconf;
	ret = rte_eth_rx_queue_setup(port, queue, nb_rxd, (unsigned int)socket, &rxconf, rx_pool);
	if (ret != 0)
		return ret;
	return rte_eth_tx_queue_setup(port, queue, nb_txd, (unsigned int)socket, &txconf);
}

int cf_port_stop_queue(uint16_t port, uint16_t queue)
{
	int rx = rte_eth_dev_rx_queue_stop(port, queue);
	int tx = rte_eth_dev_tx_queue_stop(port, queue);

	return rx != 0 ? rx : tx;
}

void *cf_flow_udp_dst_to_queue(uint16_t port, uint16_t udp_dst, uint16_t queue, int *err,
			       char *msg, size_t msg_len)
{
	struct rte_flow_attr attr;
	struct rte_flow_item_udp spec, mask;
	struct rte_flow_item pattern[4];
	struct rte_flow_action_queue q;
	struct rte_flow_action actions[2];
	struct rte_flow_error fe;
	struct rte_flow *flow;

	memset(&attr, 0, sizeof(attr));
	memset(&spec, 0, sizeof(spec));
	memset(&mask, 0, sizeof(mask));
	memset(pattern, 0, sizeof(pattern));
	memset(actions, 0, sizeof(actions));
	memset(&fe, 0, sizeof(fe));
	attr.ingress = 1;
	spec.hdr.dst_port = rte_cpu_to_be_16(udp_dst);
	mask.hdr.dst_port = RTE_BE16(0xffff);
	pattern[0].type = RTE_FLOW_ITEM_TYPE_ETH;
	pattern[1].type = RTE_FLOW_ITEM_TYPE_IPV4;
	pattern[2].type = RTE_FLOW_ITEM_TYPE_UDP;
	pattern[2].spec = &spec;
	pattern[2].mask = &mask;
	pattern[3].type = RTE_FLOW_ITEM_TYPE_END;
	q.index = queue;
	actions[0].type = RTE_FLOW_ACTION_TYPE_QUEUE;
	actions[0].conf = &q;
	actions[1].type = RTE_FLOW_ACTION_TYPE_END;
	flow = rte_flow_create(port, &attr, pattern, actions, &fe);
	if (flow == NULL) {
		*err = rte_errno != 0 ? rte_errno : EINVAL;
		snprintf(msg, msg_len, "%s", fe.message != NULL ? fe.message : "no message");
	}
	return flow;
}

int cf_flow_destroy(uint16_t port, void *flow)
{
	struct rte_flow_error fe;

	return rte_flow_destroy(port, (struct rte_flow *)flow, &fe);
}

uint64_t cf_port_rx_nombuf(uint16_t port)
{
	struct rte_eth_stats st;

	if (rte_eth_stats_get(port, &st) != 0)
		return 0;
	return st.rx_nombuf;
}

struct rte_mbuf *cf_pktmbuf_alloc(struct rte_mempool *mp) { return rte_pktmbuf_alloc(mp); }
void cf_pktmbuf_free(struct rte_mbuf *m) { rte_pktmbuf_free(m); }
int cf_pktmbuf_chain(struct rte_mbuf *head, struct rte_mbuf *tail) { return rte_pktmbuf_chain(head, tail); }

void cf_attach_extbuf(struct rte_mbuf *m, void *addr, uint64_t iova, uint16_t len,
		      struct rte_mbuf_ext_shared_info *shinfo)
{
	rte_mbuf_ext_refcnt_set(shinfo, 1);
	rte_pktmbuf_attach_extbuf(m, addr, (rte_iova_t)iova, len, shinfo);
	m->data_len = len;
	m->pkt_len = len;
}

void cf_set_tx_cksum_offload(struct rte_mbuf *m, uint16_t l2_len, uint16_t l3_len)
{
	m->l2_len = l2_len;
	m->l3_len = l3_len;
	m->ol_flags |= RTE_MBUF_F_TX_IPV4 | RTE_MBUF_F_TX_IP_CKSUM | RTE_MBUF_F_TX_UDP_CKSUM;
}

unsigned int cf_ring_drain(struct rte_ring *r)
{
	void *m;
	unsigned int n = 0;

	while (rte_ring_dequeue(r, &m) == 0) {
		rte_pktmbuf_free((struct rte_mbuf *)m);
		n++;
	}
	return n;
}

uint16_t cf_tx_burst(uint16_t port, uint16_t queue, struct rte_mbuf **pkts, uint16_t n)
{
	return rte_eth_tx_burst(port, queue, pkts, n);
}

uint16_t cf_rx_burst(uint16_t port, uint16_t queue, struct rte_mbuf **pkts, uint16_t n)
{
	return rte_eth_rx_burst(port, queue, pkts, n);
}

void *cf_mbuf_data(const struct rte_mbuf *m) { return rte_pktmbuf_mtod(m, void *); }
uint16_t cf_mbuf_data_len(const struct rte_mbuf *m) { return m->data_len; }
uint32_t cf_mbuf_pkt_len(const struct rte_mbuf *m) { return m->pkt_len; }
uint16_t cf_mbuf_nb_segs(const struct rte_mbuf *m) { return m->nb_segs; }
struct rte_mbuf *cf_mbuf_next(const struct rte_mbuf *m) { return m->next; }

int cf_mbuf_tx_cksum_offload(const struct rte_mbuf *m, uint16_t *l2, uint16_t *l3)
{
	const uint64_t want = RTE_MBUF_F_TX_IPV4 | RTE_MBUF_F_TX_IP_CKSUM | RTE_MBUF_F_TX_UDP_CKSUM;

	*l2 = m->l2_len;
	*l3 = m->l3_len;
	return (m->ol_flags & want) == want;
}

int cf_mbuf_rx_ip_cksum(const struct rte_mbuf *m)
{
	uint64_t f = m->ol_flags & RTE_MBUF_F_RX_IP_CKSUM_MASK;
	if (f == RTE_MBUF_F_RX_IP_CKSUM_GOOD)
		return 1;
	if (f == RTE_MBUF_F_RX_IP_CKSUM_BAD)
		return -1;
	return 0;
}

int cf_mbuf_rx_l4_cksum(const struct rte_mbuf *m)
{
	uint64_t f = m->ol_flags & RTE_MBUF_F_RX_L4_CKSUM_MASK;
	if (f == RTE_MBUF_F_RX_L4_CKSUM_GOOD)
		return 1;
	if (f == RTE_MBUF_F_RX_L4_CKSUM_BAD)
		return -1;
	return 0;
}

void cf_mbuf_rx_info(const struct rte_mbuf *m, struct cf_rx_info *out)
{
	out->buf_addr = m->buf_addr;
	out->pool = m->pool;
	out->pkt_len = m->pkt_len;
	out->data_off = m->data_off;
	out->data_len = m->data_len;
	out->nb_segs = m->nb_segs;
	out->ip_cksum = (int8_t)cf_mbuf_rx_ip_cksum(m);
	out->l4_cksum = (int8_t)cf_mbuf_rx_l4_cksum(m);
}
