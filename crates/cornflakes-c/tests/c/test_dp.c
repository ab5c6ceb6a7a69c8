/*
 * The kernel-bypass datapaths of the C API tested from C: an AF_XDP (cf_dp_xdp_new) or DPDK
 * (cf_dp_ice_new, on the net_af_packet virtual device) server datapath on one end of a veth
 * pair, in network namespace A, and a socket datapath (cf_dp_socket_new) made in namespace B
 * as its peer. Checks: the handle's kind and what it has not (no file descriptor), ARP
 * answered by the stack, a copy each way, a message with two pinned values sent by reference
 * (reference counts held by the send until the device is done, then given back), messages of
 * several frames each way, 64 round trips, and junk datagrams counted as drops, not crashes.
 *
 * Built and run by crates/cornflakes-c/tests/c/run.sh (plain and with -fsanitize=address),
 * which creates the namespaces and the veth pair and runs this inside namespace A:
 *
 *   ip netns exec NS_A test_dp SCHEMA_DIR xdp IFNAME NS_B IP_A IP_B IP_B=MAC_B
 *   ip netns exec NS_A test_dp SCHEMA_DIR ice "DPDK ARGS" NS_B IP_A IP_B -
 */
#define _GNU_SOURCE
#include "cornflakes.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

static const uint16_t PORT = 7100;

/* Moves this thread into network namespace `ns` (a name under /run/netns); returns the fd of
 * the namespace it was in, or -1. */
static int enter_ns(const char *ns) {
    int home = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
    char path[256];
    snprintf(path, sizeof path, "/run/netns/%s", ns);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (home < 0 || fd < 0 || setns(fd, CLONE_NEWNET) != 0) {
        perror(path);
        if (home >= 0) close(home);
        if (fd >= 0) close(fd);
        return -1;
    }
    close(fd);
    return home;
}

static void leave_ns(int home) {
    if (setns(home, CLONE_NEWNET) != 0) perror("setns back");
    close(home);
}

/* Receives on `dp` until `n_want` messages arrived or 5 s passed; while waiting, also polls
 * `other` (whose stack may have to answer ARP or reap completions). */
static size_t recv_wait(cf_dp dp, cf_dp other, cf_rx *out, size_t n_want) {
    size_t got = 0;
    for (int i = 0; i < 5000 && got < n_want; i++) {
        size_t n = 0;
        OK(cf_dp_recv(dp, out + got, n_want - got, &n));
        got += n;
        if (other.id != 0) {
            cf_rx stray[4];
            size_t m = 0;
            OK(cf_dp_recv(other, stray, 4, &m));
            for (size_t k = 0; k < m; k++) OK(cf_buf_release(stray[k].data));
        }
        if (got < n_want) usleep(1000);
    }
    return got;
}

/* Sends with retries while the peer's address is being resolved (CF_ERR_AGAIN). */
static cf_status send_copy_retry(cf_dp dp, uint32_t conn, uint32_t id, const uint8_t *d,
                                 size_t n) {
    cf_status s = CF_ERR_AGAIN;
    for (int i = 0; i < 2000 && s == CF_ERR_AGAIN; i++) {
        s = cf_dp_send_copy(dp, conn, 0, id, 9, d, n);
        if (s == CF_ERR_AGAIN) {
            cf_rx rx[4];
            size_t m = 0;
            cf_dp_flush(dp);
            cf_dp_recv(dp, rx, 4, &m);
            for (size_t k = 0; k < m; k++) cf_buf_release(rx[k].data);
            usleep(1000);
        }
    }
    return s;
}

static const uint8_t *pattern(size_t n) {
    static uint8_t buf[20000];
    for (size_t i = 0; i < n && i < sizeof buf; i++) buf[i] = (uint8_t)(i * 13 + 5);
    return buf;
}

int main(int argc, char **argv) {
    if (argc != 8) {
        fprintf(stderr, "usage: %s SCHEMA_DIR xdp|ice SPEC NS_B IP_A IP_B PEER|-\n", argv[0]);
        return 2;
    }
    const char *schema_dir = argv[1], *kind = argv[2], *spec = argv[3], *ns_b = argv[4];
    const char *ip_a = argv[5], *ip_b = argv[6], *peer = strcmp(argv[7], "-") ? argv[7] : NULL;
    printf("cornflakes C API %s, datapaths built: %s\n", cf_version(), cf_dp_kinds());
    CHECK(strstr(cf_dp_kinds(), kind) != NULL);

    /* The peer: a socket datapath and a plain UDP socket (for junk), made in namespace B. */
    int home = enter_ns(ns_b);
    if (home < 0) return 1;
    cf_dp client;
    /* At the kernel-bypass server's MTU (and the veth's): a larger datagram would not fit. */
    cf_socket_opts opts = {0};
    opts.mtu = CF_NIC_MTU;
    OK(cf_dp_socket_new_opts(ip_b, 0, &opts, &client));
    int junk_fd = socket(AF_INET, SOCK_DGRAM, 0);
    leave_ns(home);
    uint16_t cport = 0;
    OK(cf_dp_local_port(client, &cport));

    /* The server: the datapath under test, here in namespace A. */
    cf_dp server = {0};
    if (strcmp(kind, "xdp") == 0) {
        FAILS(cf_dp_xdp_new(spec, ip_a, PORT, "not-a-peer", 0, &server), CF_ERR_INVALID);
        FAILS(cf_dp_xdp_new("cf-no-such-if", ip_a, PORT, NULL, 0, &server), CF_ERR_IO);
        FAILS(cf_dp_xdp_new(NULL, ip_a, PORT, NULL, 0, &server), CF_ERR_NULL);
        OK(cf_dp_xdp_new(spec, ip_a, PORT, peer, 0, &server));
    } else {
        /* Through the options, at the veth's (and the client's) MTU. */
        cf_nic_opts nic = {0};
        nic.mtu = CF_NIC_MTU;
        OK(cf_dp_ice_new_opts(spec, ip_a, PORT, &nic, &server));
    }
    if (server.id == 0) {
        fprintf(stderr, "could not open the %s datapath: %s\n", kind, cf_last_error());
        return 1;
    }
    const char *k = NULL;
    OK(cf_dp_kind(server, &k));
    CHECK(k != NULL && strcmp(k, kind) == 0);
    OK(cf_dp_kind(client, &k));
    CHECK(strcmp(k, "socket") == 0);
    int fd = -1;
    FAILS(cf_dp_fd(server, &fd), CF_ERR_UNSUPPORTED);
    uint16_t sport = 0;
    OK(cf_dp_local_port(server, &sport));
    CHECK(sport == PORT);
    size_t max_len = 0;
    OK(cf_dp_max_message_len(server, &max_len));
    CHECK(max_len >= 16384);

    /* client → server: a copy (the kernel in B asks for A's address; the stack answers) */
    uint32_t conn;
    OK(cf_dp_connect(client, ip_a, PORT, &conn));
    OK(cf_dp_send_copy(client, conn, 0xfeedULL, 5, 9, (const uint8_t *)"hello", 5));
    OK(cf_dp_flush(client));
    cf_rx rx[64];
    size_t n = recv_wait(server, (cf_dp){0}, rx, 1);
    CHECK(n == 1);
    if (n != 1) return 1;
    CHECK(rx[0].msg_id == 5 && rx[0].msg_type == 9 && rx[0].peer_port == cport);
    CHECK(rx[0].incarnation == 0xfeedULL);
    CHECK(rx[0].peer_ip == ntohl(inet_addr(ip_b)));
    const uint8_t *p;
    size_t len;
    OK(cf_buf_data(rx[0].data, &p, &len));
    CHECK(len == 5 && memcmp(p, "hello", 5) == 0);
    uint32_t back = rx[0].conn;
    OK(cf_buf_release(rx[0].data));

    /* server → client: a message with one copied and two referenced values */
    char path[1024];
    snprintf(path, sizeof path, "%s/kv.proto", schema_dir);
    cf_schema kv;
    OK(cf_schema_load(path, NULL, &kv));
    uint32_t getm_resp, f_id, f_vals;
    OK(cf_schema_message(kv, "kv.GetMResp", &getm_resp));
    OK(cf_schema_field(kv, getm_resp, "id", &f_id));
    OK(cf_schema_field(kv, getm_resp, "vals", &f_vals));
    cf_mem smem;
    OK(cf_dp_memory(server, &smem));
    cf_arena arena;
    OK(cf_arena_new(smem, &arena));
    OK(cf_arena_set_threshold(arena, 512));
    cf_buf v1, v2;
    OK(cf_buf_alloc(smem, pattern(2048), 2048, &v1));
    OK(cf_buf_alloc(smem, pattern(3000), 3000, &v2));
    cf_msg reply;
    OK(cf_msg_new(arena, kv, getm_resp, &reply));
    OK(cf_msg_set_uint(reply, f_id, 42));
    OK(cf_msg_append_bytes(reply, f_vals, (const uint8_t *)"tiny", 4));
    OK(cf_msg_append_buf(reply, f_vals, v1));
    OK(cf_msg_append_buf(reply, f_vals, v2));
    cf_status st = CF_ERR_AGAIN;
    for (int i = 0; i < 2000 && st == CF_ERR_AGAIN; i++) {
        st = cf_dp_send_msg(server, back, 0xfeedULL, 7, 10, reply);
        if (st == CF_ERR_AGAIN) usleep(1000); /* only if the peer is not resolved yet */
    }
    CHECK(st == CF_OK);
    uint32_t rc = 0;
    OK(cf_buf_refcount(v1, &rc));
    CHECK(rc >= 3); /* this handle, the message's field, the send */
    OK(cf_arena_reset(arena));
    OK(cf_dp_flush(server));
    n = recv_wait(client, server, rx, 1);
    CHECK(n == 1);
    if (n != 1) return 1;
    CHECK(rx[0].msg_id == 7 && rx[0].msg_type == 10 && rx[0].incarnation == 0xfeedULL);
    cf_mem cmem;
    OK(cf_dp_memory(client, &cmem));
    cf_arena carena;
    OK(cf_arena_new(cmem, &carena));
    cf_msg got;
    OK(cf_msg_decode_buf(carena, kv, getm_resp, rx[0].data, &got));
    OK(cf_buf_release(rx[0].data));
    uint64_t id = 0;
    OK(cf_msg_get_uint(got, f_id, &id));
    CHECK(id == 42);
    size_t count = 0;
    OK(cf_msg_count(got, f_vals, &count));
    CHECK(count == 3);
    OK(cf_msg_get_bytes_at(got, f_vals, 0, &p, &len));
    CHECK(len == 4 && memcmp(p, "tiny", 4) == 0);
    OK(cf_msg_get_bytes_at(got, f_vals, 1, &p, &len));
    CHECK(len == 2048 && memcmp(p, pattern(2048), 2048) == 0);
    OK(cf_msg_get_bytes_at(got, f_vals, 2, &p, &len));
    CHECK(len == 3000 && memcmp(p, pattern(3000), 3000) == 0);
    OK(cf_arena_reset(carena));
    /* the device is done with the values: the send's references are given back */
    size_t in_flight = 1;
    for (int i = 0; i < 2000 && in_flight > 0; i++) {
        OK(cf_dp_flush(server));
        OK(cf_dp_in_flight(server, &in_flight));
        if (in_flight > 0) usleep(1000);
    }
    CHECK(in_flight == 0);
    OK(cf_buf_refcount(v1, &rc));
    CHECK(rc == 1);
    OK(cf_buf_refcount(v2, &rc));
    CHECK(rc == 1);
    OK(cf_buf_release(v1));
    OK(cf_buf_release(v2));

    /* messages of several frames: 9000 bytes each way (IP MTU 1500) */
    OK(send_copy_retry(server, back, 8, pattern(9000), 9000));
    OK(cf_dp_flush(server));
    n = recv_wait(client, server, rx, 1);
    CHECK(n == 1);
    if (n == 1) {
        OK(cf_buf_data(rx[0].data, &p, &len));
        CHECK(rx[0].msg_id == 8 && len == 9000 && memcmp(p, pattern(9000), 9000) == 0);
        OK(cf_buf_release(rx[0].data));
    }
    OK(cf_dp_send_copy(client, conn, 0, 9, 9, pattern(12000), 12000));
    OK(cf_dp_flush(client));
    n = recv_wait(server, (cf_dp){0}, rx, 1);
    CHECK(n == 1);
    if (n == 1) {
        OK(cf_buf_data(rx[0].data, &p, &len));
        CHECK(rx[0].msg_id == 9 && len == 12000 && memcmp(p, pattern(12000), 12000) == 0);
        OK(cf_buf_release(rx[0].data));
    }

    /* 64 round trips: the server echoes each request's bytes by reference (cf_dp_send_bufs
     * with the received buffer) */
    size_t echoed = 0;
    for (uint32_t i = 0; i < 64; i++) {
        uint8_t req[600];
        memset(req, (int)i, sizeof req);
        OK(cf_dp_send_copy(client, conn, 0, 100 + i, 3, req, sizeof req));
        OK(cf_dp_flush(client));
        cf_rx r;
        if (recv_wait(server, (cf_dp){0}, &r, 1) != 1) break;
        OK(cf_dp_send_bufs(server, r.conn, r.incarnation, r.msg_id, r.msg_type, &r.data, 1));
        OK(cf_dp_flush(server));
        OK(cf_buf_release(r.data));
        if (recv_wait(client, server, &r, 1) != 1) break;
        OK(cf_buf_data(r.data, &p, &len));
        if (r.msg_id == 100 + i && len == sizeof req && memcmp(p, req, len) == 0) echoed++;
        OK(cf_buf_release(r.data));
    }
    CHECK(echoed == 64);

    /* junk datagrams to the server's port: counted, dropped, the server goes on */
    cf_dp_counters before, after;
    OK(cf_dp_get_counters(server, &before));
    struct sockaddr_in to = {0};
    to.sin_family = AF_INET;
    to.sin_port = htons(PORT);
    to.sin_addr.s_addr = inet_addr(ip_a);
    srand(11);
    for (int i = 0; i < 100; i++) {
        uint8_t junk[40];
        size_t jl = (size_t)(rand() % 12); /* shorter than the framing header */
        for (size_t j = 0; j < jl; j++) junk[j] = (uint8_t)rand();
        CHECK(sendto(junk_fd, junk, jl, 0, (struct sockaddr *)&to, sizeof to) == (ssize_t)jl);
    }
    close(junk_fd);
    size_t delivered = 0;
    for (int i = 0; i < 200; i++) {
        size_t m = 0;
        OK(cf_dp_recv(server, rx, 64, &m));
        for (size_t j = 0; j < m; j++) OK(cf_buf_release(rx[j].data));
        delivered += m;
        OK(cf_dp_get_counters(server, &after));
        if (after.total_drops - before.total_drops >= 100) break;
        usleep(1000);
    }
    CHECK(delivered == 0);
    CHECK(after.total_drops - before.total_drops == 100);
    printf("%s: 100 junk datagrams dropped (%llu truncated, %llu bad framing)\n", kind,
           (unsigned long long)(after.truncated - before.truncated),
           (unsigned long long)(after.bad_framing - before.bad_framing));
    OK(send_copy_retry(client, conn, 1000, (const uint8_t *)"still here", 10));
    OK(cf_dp_flush(client));
    n = recv_wait(server, (cf_dp){0}, rx, 1);
    CHECK(n == 1);
    if (n == 1) OK(cf_buf_release(rx[0].data));

    OK(cf_arena_release(carena));
    OK(cf_arena_release(arena));
    OK(cf_mem_release(cmem));
    OK(cf_mem_release(smem));
    OK(cf_schema_release(kv));
    OK(cf_dp_release(server));
    OK(cf_dp_release(client));
    FAILS(cf_dp_recv(server, rx, 1, &n), CF_ERR_BAD_HANDLE);
    printf("%s: %d passed, %d failed\n", kind, checks - failures, failures);
    return failures == 0 ? 0 : 1;
}
