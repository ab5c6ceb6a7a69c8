/* Exported wrappers for rdma-core's inline functions and macros (see shim.h). */
#include "shim.h"

#include <arpa/inet.h>
#include <errno.h>
#include <string.h>

struct ibv_mr *cf_ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t length, int access)
{
	return ibv_reg_mr(pd, addr, length, access);
}

int cf_ibv_query_port(struct ibv_context *ctx, uint8_t port, struct ibv_port_attr *attr)
{
	return ibv_query_port(ctx, port, attr);
}

int cf_ibv_query_device_ex(struct ibv_context *ctx, struct ibv_device_attr_ex *attr)
{
	return ibv_query_device_ex(ctx, NULL, attr);
}

struct ibv_cq *cf_ibv_cq_ex_to_cq(struct ibv_cq_ex *cq)
{
	return ibv_cq_ex_to_cq(cq);
}

int cf_ibv_destroy_flow(struct ibv_flow *flow)
{
	return ibv_destroy_flow(flow);
}

void cf_ctrl_seg_offsets(size_t out[4])
{
	out[0] = offsetof(struct mlx5_wqe_ctrl_seg, qpn_ds);
	out[1] = offsetof(struct mlx5_wqe_ctrl_seg, signature);
	out[2] = offsetof(struct mlx5_wqe_ctrl_seg, fm_ce_se);
	out[3] = offsetof(struct mlx5_wqe_ctrl_seg, imm);
}

struct cf_flow_udp {
	struct ibv_flow_attr attr;
	struct ibv_flow_spec_eth eth;
	struct ibv_flow_spec_ipv4 ipv4;
	struct ibv_flow_spec_tcp_udp udp;
};

struct cf_flow_eth {
	struct ibv_flow_attr attr;
	struct ibv_flow_spec_eth eth;
};

/* The kernel walks the specs back to back by their `size`: no padding may sit between them. */
_Static_assert(offsetof(struct cf_flow_udp, eth) == sizeof(struct ibv_flow_attr), "padding");
_Static_assert(offsetof(struct cf_flow_udp, ipv4) ==
	       sizeof(struct ibv_flow_attr) + sizeof(struct ibv_flow_spec_eth), "padding");
_Static_assert(offsetof(struct cf_flow_udp, udp) ==
	       sizeof(struct ibv_flow_attr) + sizeof(struct ibv_flow_spec_eth) +
	       sizeof(struct ibv_flow_spec_ipv4), "padding");
_Static_assert(offsetof(struct cf_flow_eth, eth) == sizeof(struct ibv_flow_attr), "padding");

static void fill_eth(struct ibv_flow_spec_eth *eth, const uint8_t dst_mac[6], uint16_t ethertype)
{
	eth->type = IBV_FLOW_SPEC_ETH;
	eth->size = sizeof(*eth);
	memcpy(eth->val.dst_mac, dst_mac, 6);
	memset(eth->mask.dst_mac, 0xff, 6);
	eth->val.ether_type = htons(ethertype);
	eth->mask.ether_type = 0xffff;
}

struct ibv_flow *cf_create_flow(struct ibv_qp *qp, uint8_t port_num, const uint8_t dst_mac[6],
				uint16_t ethertype, int32_t udp_dst_port)
{
	if (udp_dst_port >= 0) {
		struct cf_flow_udp f;

		if (udp_dst_port > 0xffff) {
			errno = EINVAL;
			return NULL;
		}
		memset(&f, 0, sizeof(f));
		f.attr.type = IBV_FLOW_ATTR_NORMAL;
		f.attr.size = sizeof(f);
		f.attr.num_of_specs = 3;
		f.attr.port = port_num;
		fill_eth(&f.eth, dst_mac, ethertype);
		f.ipv4.type = IBV_FLOW_SPEC_IPV4;
		f.ipv4.size = sizeof(f.ipv4);
		f.udp.type = IBV_FLOW_SPEC_UDP;
		f.udp.size = sizeof(f.udp);
		f.udp.val.dst_port = htons((uint16_t)udp_dst_port);
		f.udp.mask.dst_port = 0xffff;
		return ibv_create_flow(qp, &f.attr);
	} else {
		struct cf_flow_eth f;

		memset(&f, 0, sizeof(f));
		f.attr.type = IBV_FLOW_ATTR_NORMAL;
		f.attr.size = sizeof(f);
		f.attr.num_of_specs = 1;
		f.attr.port = port_num;
		fill_eth(&f.eth, dst_mac, ethertype);
		return ibv_create_flow(qp, &f.attr);
	}
}
