// SPDX-License-Identifier: (MIT OR Apache-2.0)
//
// Cornflakes AF_XDP steering program.
//
// Redirects to the AF_XDP socket of the receiving queue:
//   - unfragmented IPv4/UDP datagrams whose destination port is cf_config[CFG_PORT], or with
//     several server cores (cf_config[CFG_PORTS] = N > 1) one of the N ports from it on:
//     port CFG_PORT + i belongs to core i, whose socket is bound to queue i. A frame for port
//     CFG_PORT + i that arrives on another queue is counted (ST_MISSTEERED) and dropped: an
//     AF_XDP socket only takes its own queue's frames, so steering a port to its queue is the
//     NIC's job (an ntuple rule; on veth the sender's TX queue, docs/cores.md); and
//   - ARP frames when cf_config[CFG_ARP_TO_STACK] is non-zero (the Cornflakes stack then owns
//     the interface's IPv4 address and answers ARP itself).
// Everything else (and any frame of a queue without a socket) goes to the kernel (XDP_PASS).
//
// The section is "xdp.frags" so the program may be attached to an interface whose MTU exceeds
// one page (jumbo frames arrive as multi-buffer xdp_buffs). The headers we read are always in
// the first buffer: every driver puts at least the first page there.

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/udp.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#define CFG_PORT 0
#define CFG_ARP_TO_STACK 1
#define CFG_PORTS 2
#define CFG_LEN 3

// Counters (per CPU would be cheaper; one array entry each is enough for tests and monitoring).
#define ST_REDIRECTED 0
#define ST_ARP 1
#define ST_PASSED 2
#define ST_MISSTEERED 3
#define ST_LEN 4

struct {
	__uint(type, BPF_MAP_TYPE_XSKMAP);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, __u32);
} cf_xsks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, CFG_LEN);
	__type(key, __u32);
	__type(value, __u32);
} cf_config SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, ST_LEN);
	__type(key, __u32);
	__type(value, __u64);
} cf_stats SEC(".maps");

static __always_inline __u32 config(__u32 key)
{
	__u32 *v = bpf_map_lookup_elem(&cf_config, &key);
	return v ? *v : 0;
}

static __always_inline void count(__u32 key)
{
	__u64 *v = bpf_map_lookup_elem(&cf_stats, &key);
	if (v)
		__sync_fetch_and_add(v, 1);
}

static __always_inline int to_socket(struct xdp_md *ctx, __u32 stat)
{
	count(stat);
	// Falls back to XDP_PASS when the queue has no socket bound.
	return bpf_redirect_map(&cf_xsks, ctx->rx_queue_index, XDP_PASS);
}

SEC("xdp.frags")
int cf_xdp_redirect(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;

	if ((void *)(eth + 1) > data_end)
		goto pass;

	if (eth->h_proto == bpf_htons(ETH_P_ARP)) {
		if (config(CFG_ARP_TO_STACK))
			return to_socket(ctx, ST_ARP);
		goto pass;
	}
	if (eth->h_proto != bpf_htons(ETH_P_IP))
		goto pass;

	struct iphdr *ip = (void *)(eth + 1);
	if ((void *)(ip + 1) > data_end)
		goto pass;
	if (ip->version != 4 || ip->ihl < 5 || ip->protocol != IPPROTO_UDP)
		goto pass;
	// Fragments (MF set or a non-zero offset) go to the kernel, which reassembles them.
	if (ip->frag_off & bpf_htons(0x3fff))
		goto pass;

	struct udphdr *udp = (void *)ip + ip->ihl * 4;
	if ((void *)(udp + 1) > data_end)
		goto pass;

	__u32 port = config(CFG_PORT);
	__u32 ports = config(CFG_PORTS);
	__u32 dest = bpf_ntohs(udp->dest);
	if (port != 0 && dest >= port && dest - port < (ports > 1 ? ports : 1)) {
		if (ports > 1 && dest - port != ctx->rx_queue_index) {
			count(ST_MISSTEERED);
			return XDP_DROP;
		}
		return to_socket(ctx, ST_REDIRECTED);
	}

pass:
	count(ST_PASSED);
	return XDP_PASS;
}

// Attached to the far end of a veth pair in tests: veth only runs its native XDP path (and so
// delivers multi-buffer frames without linearising) when the receiving end has a program.
SEC("xdp.frags")
int cf_xdp_pass(struct xdp_md *ctx)
{
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
