/* Bindgen input for datapath-mlx5: rdma-core's verbs and mlx5 direct-verbs headers, plus
 * exported wrappers (shim.c) for the functions rdma-core defines static inline or as macros,
 * which have no symbol to link against. */
#ifndef CF_MLX5_SHIM_H
#define CF_MLX5_SHIM_H

#include <stddef.h>
#include <stdint.h>
#include <infiniband/verbs.h>
#include <infiniband/mlx5dv.h>

/* ibv_reg_mr is a macro over __ibv_reg_mr. */
struct ibv_mr *cf_ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t length, int access);
/* ibv_query_port is a macro over a static inline. */
int cf_ibv_query_port(struct ibv_context *ctx, uint8_t port, struct ibv_port_attr *attr);
/* static inline */
int cf_ibv_query_device_ex(struct ibv_context *ctx, struct ibv_device_attr_ex *attr);
/* static inline */
struct ibv_cq *cf_ibv_cq_ex_to_cq(struct ibv_cq_ex *cq);
/* static inline */
int cf_ibv_destroy_flow(struct ibv_flow *flow);

/* Creates a flow rule steering frames to `dst_mac` with `ethertype` to `qp`; with
 * `udp_dst_port` >= 0 the rule also matches IPv4/UDP with that destination port. Builds the
 * ibv_flow_attr + spec list (a variable-length C layout) here rather than in Rust. Returns NULL
 * with errno set on failure. */
struct ibv_flow *cf_create_flow(struct ibv_qp *qp, uint8_t port_num, const uint8_t dst_mac[6],
                                uint16_t ethertype, int32_t udp_dst_port);

/* Offsets of struct mlx5_wqe_ctrl_seg's fields as the C compiler lays them out (the struct is
 * packed, so bindgen keeps it opaque): qpn_ds, signature, fm_ce_se, imm. */
void cf_ctrl_seg_offsets(size_t out[4]);

#endif
