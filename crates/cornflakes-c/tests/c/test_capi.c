/*
 * The C API tested from C: buffers and their reference counts, handle checks (zero, stale,
 * stale after its slot was reused, wrong kind, other thread, NULL pointers), messages built, serialized, decoded and read back
 * (scalars, strings, repeated, nested), zero-copy fields, arena resets, and two socket
 * datapaths on 127.0.0.1 exchanging a message with a pinned value, plus malformed datagrams
 * counted, not crashing. Built and run by crates/cornflakes-c/tests/c/run.sh (plain and with
 * -fsanitize=address), from scripts/test.sh.
 *
 * Usage: test_capi SCHEMA_DIR   (the repository's schemas/)
 */
#include "cornflakes.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

static const char *schema_dir;

static void test_buffers(void) {
    cf_mem mem;
    OK(cf_mem_new(&mem));
    size_t max = 0;
    OK(cf_mem_max_len(mem, &max));
    CHECK(max >= 16384);

    uint8_t data[3000];
    for (size_t i = 0; i < sizeof data; i++) data[i] = (uint8_t)(i * 7);
    cf_buf b;
    OK(cf_buf_alloc(mem, data, sizeof data, &b));
    const uint8_t *p = NULL;
    size_t n = 0;
    OK(cf_buf_data(b, &p, &n));
    CHECK(n == sizeof data && memcmp(p, data, n) == 0);
    CHECK(p != data); /* a copy, in pinned memory */

    uint32_t rc = 0;
    OK(cf_buf_refcount(b, &rc));
    CHECK(rc == 1);
    cf_buf b2, s;
    OK(cf_buf_retain(b, &b2));
    OK(cf_buf_slice(b, 100, 50, &s));
    OK(cf_buf_refcount(b, &rc));
    CHECK(rc == 3);
    const uint8_t *sp;
    OK(cf_buf_data(s, &sp, &n));
    CHECK(n == 50 && sp == p + 100);
    FAILS(cf_buf_slice(b, 2990, 20, &s), CF_ERR_INVALID);

    /* pointer recovery: inside the buffer → a reference; heap memory → {0}, CF_OK */
    cf_buf r;
    OK(cf_mem_recover(mem, p + 10, 600, &r));
    CHECK(r.id != 0);
    OK(cf_buf_refcount(b, &rc));
    CHECK(rc == 4);
    OK(cf_buf_release(r));
    OK(cf_mem_recover(mem, data, 600, &r));
    CHECK(r.id == 0);

    cf_buf c;
    OK(cf_buf_alloc_concat(mem, (const uint8_t *)"abc", 3, (const uint8_t *)"defg", 4, &c));
    OK(cf_buf_data(c, &p, &n));
    CHECK(n == 7 && memcmp(p, "abcdefg", 7) == 0);
    OK(cf_buf_release(c));

    /* too large for one pinned item */
    FAILS(cf_buf_alloc(mem, NULL, 0, NULL), CF_ERR_NULL);
    uint8_t *huge = calloc(1, max + 1);
    FAILS(cf_buf_alloc(mem, huge, max + 1, &c), CF_ERR_ALLOC);
    free(huge);

    OK(cf_buf_release(s));
    OK(cf_buf_release(b2));
    OK(cf_buf_release(b));
    /* released: stale */
    FAILS(cf_buf_release(b), CF_ERR_BAD_HANDLE);
    FAILS(cf_buf_data(b, &p, &n), CF_ERR_BAD_HANDLE);
    /* zero, forged, wrong kind, NULL pointers */
    cf_buf zero = {0};
    FAILS(cf_buf_release(zero), CF_ERR_BAD_HANDLE);
    cf_buf forged = {0x123456789abcdefULL};
    FAILS(cf_buf_release(forged), CF_ERR_BAD_HANDLE);
    cf_buf not_a_buf = {mem.id};
    FAILS(cf_buf_release(not_a_buf), CF_ERR_BAD_HANDLE);
    CHECK(strstr(cf_last_error(), "cf_mem") != NULL);
    FAILS(cf_buf_alloc(mem, NULL, 5, &c), CF_ERR_NULL);
    OK(cf_mem_release(mem));
    FAILS(cf_mem_release(mem), CF_ERR_BAD_HANDLE);
    CHECK(strcmp(cf_status_name(CF_ERR_BAD_HANDLE), "CF_ERR_BAD_HANDLE") == 0);
    CHECK(strcmp(cf_status_name(42), "CF_UNKNOWN") == 0);
}

struct thread_arg {
    cf_buf buf;
    int status;
};

static void *other_thread(void *p) {
    struct thread_arg *a = p;
    a->status = cf_buf_release(a->buf);
    return NULL;
}

static void test_other_thread(void) {
    cf_mem mem;
    OK(cf_mem_new(&mem));
    cf_buf b;
    OK(cf_buf_alloc(mem, (const uint8_t *)"x", 1, &b));
    struct thread_arg a = {b, 0};
    pthread_t t;
    CHECK(pthread_create(&t, NULL, other_thread, &a) == 0);
    pthread_join(t, NULL);
    CHECK(a.status == CF_ERR_BAD_HANDLE);
    OK(cf_buf_release(b)); /* still fine on its own thread */
    OK(cf_mem_release(mem));
}

/* A released handle stays refused once its slot holds a new entry (the slot's generation
 * was bumped), and calls with it leave the new entry alone. */
static void test_reused_slot(void) {
    cf_mem mem;
    OK(cf_mem_new(&mem));
    cf_buf old, new_buf, r;
    OK(cf_buf_alloc(mem, (const uint8_t *)"old", 3, &old));
    OK(cf_buf_release(old));
    OK(cf_buf_alloc(mem, (const uint8_t *)"the new value", 13, &new_buf));
    /* The table hands the released slot out again (bits 0-23 of a handle name the slot,
     * crates/cornflakes-c/src/table.rs): the reuse the generation guards against. */
    CHECK((new_buf.id & 0xffffff) == (old.id & 0xffffff));
    CHECK(new_buf.id != old.id);
    const uint8_t *p = NULL;
    size_t n = 0;
    uint32_t rc = 0;
    FAILS(cf_buf_data(old, &p, &n), CF_ERR_BAD_HANDLE);
    CHECK(strstr(cf_last_error(), "stale") != NULL);
    FAILS(cf_buf_refcount(old, &rc), CF_ERR_BAD_HANDLE);
    FAILS(cf_buf_retain(old, &r), CF_ERR_BAD_HANDLE);
    FAILS(cf_buf_release(old), CF_ERR_BAD_HANDLE);
    CHECK(strstr(cf_last_error(), "stale") != NULL);
    /* the new entry is untouched: its bytes, and one reference */
    OK(cf_buf_data(new_buf, &p, &n));
    CHECK(n == 13 && memcmp(p, "the new value", 13) == 0);
    OK(cf_buf_refcount(new_buf, &rc));
    CHECK(rc == 1);
    OK(cf_buf_release(new_buf));
    OK(cf_mem_release(mem));
}

static cf_schema load(const char *file) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", schema_dir, file);
    cf_schema s = {0};
    OK(cf_schema_load(path, schema_dir, &s));
    return s;
}

static void test_messages(void) {
    cf_schema kv = load("kv.proto");
    uint32_t get_resp, getm_resp;
    OK(cf_schema_message(kv, "kv.GetResp", &get_resp));
    OK(cf_schema_message(kv, "kv.GetMResp", &getm_resp));
    FAILS(cf_schema_message(kv, "kv.Nope", &get_resp), CF_ERR_INVALID);
    CHECK(strstr(cf_last_error(), "kv.GetReq") != NULL); /* lists what there is */
    uint32_t f_id, f_val, f_status, f_vals;
    OK(cf_schema_field(kv, get_resp, "id", &f_id));
    OK(cf_schema_field(kv, get_resp, "val", &f_val));
    OK(cf_schema_field(kv, get_resp, "status", &f_status));
    OK(cf_schema_field(kv, getm_resp, "vals", &f_vals));
    FAILS(cf_schema_field(kv, get_resp, "nope", &f_id), CF_ERR_INVALID);

    cf_mem mem;
    OK(cf_mem_new(&mem));
    cf_arena arena;
    OK(cf_arena_new(mem, &arena));
    OK(cf_arena_set_threshold(arena, 512));

    uint8_t big[2048];
    memset(big, 'v', sizeof big);
    cf_buf value;
    OK(cf_buf_alloc(mem, big, sizeof big, &value));

    cf_msg m;
    OK(cf_msg_new(arena, kv, get_resp, &m));
    OK(cf_msg_set_uint(m, f_id, 77));
    OK(cf_msg_set_int(m, f_status, 1));
    OK(cf_msg_set_buf(m, f_val, value)); /* ≥ threshold and pinned: referenced */
    uint32_t rc;
    OK(cf_buf_refcount(value, &rc));
    CHECK(rc == 2);
    /* type and range checks */
    FAILS(cf_msg_set_int(m, f_id, -1), CF_ERR_INVALID);
    FAILS(cf_msg_set_double(m, f_id, 1.5), CF_ERR_INVALID);
    FAILS(cf_msg_set_uint(m, f_val, 1), CF_ERR_INVALID);
    FAILS(cf_msg_append_bytes(m, f_val, (const uint8_t *)"x", 1), CF_ERR_INVALID);
    FAILS(cf_msg_set_uint(m, 99, 1), CF_ERR_INVALID);

    size_t len = 0;
    OK(cf_msg_serialized_len(m, &len));
    CHECK(len > sizeof big);
    uint8_t *wire = malloc(len);
    size_t written = 0;
    FAILS(cf_msg_serialize(m, wire, len - 1, &written), CF_ERR_TOO_LARGE);
    OK(cf_msg_serialize(m, wire, len, &written));
    CHECK(written == len);

    cf_msg back;
    OK(cf_msg_decode(arena, kv, get_resp, wire, written, &back));
    memset(wire, 0, len); /* decode copied it */
    free(wire);
    uint64_t id = 0;
    int64_t status = 0;
    OK(cf_msg_get_uint(back, f_id, &id));
    OK(cf_msg_get_int(back, f_status, &status));
    CHECK(id == 77 && status == 1);
    const uint8_t *p;
    size_t n;
    OK(cf_msg_get_bytes(back, f_val, &p, &n));
    CHECK(n == sizeof big && memcmp(p, big, n) == 0);
    int has = -1;
    uint32_t f_pieces;
    OK(cf_schema_field(kv, get_resp, "pieces", &f_pieces));
    OK(cf_msg_has(back, f_pieces, &has));
    CHECK(has == 0);

    /* malformed input: every truncation refused, never a crash */
    OK(cf_msg_serialized_len(m, &len));
    wire = malloc(len);
    OK(cf_msg_serialize(m, wire, len, &written));
    int refused = 0;
    for (size_t cut = 0; cut < 64 && cut < len; cut++) {
        cf_msg bad;
        cf_status st = cf_msg_decode(arena, kv, get_resp, wire, cut, &bad);
        if (st == CF_ERR_DECODE) refused++;
        else if (st == CF_OK) OK(cf_msg_release(bad));
    }
    CHECK(refused >= 8);
    for (size_t i = 0; i < 16; i++) wire[i] ^= 0xff;
    cf_msg bad;
    cf_status st = cf_msg_decode(arena, kv, get_resp, wire, len, &bad);
    CHECK(st == CF_ERR_DECODE || st == CF_OK);
    if (st == CF_OK) OK(cf_msg_release(bad));
    free(wire);

    /* repeated bytes: small values copied, large pinned ones referenced */
    cf_msg mm;
    OK(cf_msg_new(arena, kv, getm_resp, &mm));
    OK(cf_msg_append_bytes(mm, f_vals, (const uint8_t *)"short", 5));
    const uint8_t *vp;
    OK(cf_buf_data(value, &vp, &n));
    OK(cf_msg_append_bytes(mm, f_vals, vp, n)); /* recovered from its address */
    OK(cf_buf_refcount(value, &rc));
    CHECK(rc == 3);
    size_t count = 0;
    OK(cf_msg_count(mm, f_vals, &count));
    CHECK(count == 2);
    OK(cf_msg_get_bytes_at(mm, f_vals, 1, &p, &n));
    CHECK(p == vp && n == sizeof big); /* the same memory: zero-copy */
    FAILS(cf_msg_get_bytes_at(mm, f_vals, 2, &p, &n), CF_ERR_INVALID);
    FAILS(cf_msg_get_bytes(mm, f_vals, &p, &n), CF_ERR_INVALID);

    /* a reset invalidates the arena's messages and releases their references */
    OK(cf_arena_reset(arena));
    OK(cf_buf_refcount(value, &rc));
    CHECK(rc == 1);
    FAILS(cf_msg_get_uint(m, f_id, &id), CF_ERR_BAD_HANDLE);
    FAILS(cf_msg_release(mm), CF_ERR_BAD_HANDLE);
    OK(cf_msg_new(arena, kv, get_resp, &m)); /* the arena is usable again */
    OK(cf_msg_get_uint(m, f_id, &id));
    CHECK(id == 0); /* absent: 0 */
    OK(cf_msg_release(m));
    FAILS(cf_msg_release(m), CF_ERR_BAD_HANDLE);

    /* strings must be UTF-8 */
    uint32_t get_req, f_key;
    OK(cf_schema_message(kv, "kv.GetReq", &get_req));
    OK(cf_schema_field(kv, get_req, "key", &f_key));
    OK(cf_msg_new(arena, kv, get_req, &m));
    FAILS(cf_msg_set_bytes(m, f_key, (const uint8_t *)"\xff\xfe", 2), CF_ERR_INVALID);
    OK(cf_msg_set_bytes(m, f_key, (const uint8_t *)"user:1", 6));
    OK(cf_msg_get_bytes(m, f_key, &p, &n));
    CHECK(n == 6 && memcmp(p, "user:1", 6) == 0);

    OK(cf_buf_release(value));
    OK(cf_arena_release(arena));
    FAILS(cf_msg_release(m), CF_ERR_BAD_HANDLE);
    OK(cf_mem_release(mem));
    OK(cf_schema_release(kv));
    FAILS(cf_schema_load("/nonexistent/x.proto", NULL, &kv), CF_ERR_DECODE);
}

static void test_nested(void) {
    cf_schema echo = load("echo.proto");
    uint32_t t1, t2, f_left, f_right, f2_left, f2_right;
    OK(cf_schema_message(echo, "echo.Tree1", &t1));
    OK(cf_schema_message(echo, "echo.Tree2", &t2));
    OK(cf_schema_field(echo, t1, "left", &f_left));
    OK(cf_schema_field(echo, t1, "right", &f_right));
    OK(cf_schema_field(echo, t2, "left", &f2_left));
    OK(cf_schema_field(echo, t2, "right", &f2_right));
    cf_arena arena, other;
    cf_mem none = {0};
    OK(cf_arena_new(none, &arena));
    OK(cf_arena_new(none, &other));

    cf_msg root, a, b, c;
    OK(cf_msg_new(arena, echo, t2, &root));
    OK(cf_msg_new(arena, echo, t1, &a));
    OK(cf_msg_set_bytes(a, f_left, (const uint8_t *)"L", 1));
    OK(cf_msg_set_bytes(a, f_right, (const uint8_t *)"R", 1));
    OK(cf_msg_new(other, echo, t1, &c));
    FAILS(cf_msg_set_message(root, f2_left, c), CF_ERR_INVALID); /* another arena */
    OK(cf_msg_new(arena, echo, t2, &b));
    FAILS(cf_msg_set_message(root, f2_left, b), CF_ERR_INVALID); /* wrong type */
    FAILS(cf_msg_set_message(root, f2_left, root), CF_ERR_INVALID);
    OK(cf_msg_set_message(root, f2_left, a));
    FAILS(cf_msg_release(a), CF_ERR_BAD_HANDLE); /* moved in */

    size_t len;
    OK(cf_msg_serialized_len(root, &len));
    uint8_t *wire = malloc(len);
    OK(cf_msg_serialize(root, wire, len, &len));
    cf_msg back, view;
    OK(cf_msg_decode(arena, echo, t2, wire, len, &back));
    free(wire);
    OK(cf_msg_get_message(back, f2_left, &view));
    const uint8_t *p;
    size_t n;
    OK(cf_msg_get_bytes(view, f_right, &p, &n));
    CHECK(n == 1 && p[0] == 'R');
    FAILS(cf_msg_set_bytes(view, f_right, (const uint8_t *)"x", 1), CF_ERR_INVALID); /* read-only */
    FAILS(cf_msg_get_message(back, f2_right, &view), CF_ERR_INVALID);                 /* absent */
    OK(cf_msg_release(back));
    FAILS(cf_msg_get_bytes(view, f_right, &p, &n), CF_ERR_BAD_HANDLE); /* root gone */

    OK(cf_arena_release(other));
    FAILS(cf_msg_release(c), CF_ERR_BAD_HANDLE);
    OK(cf_arena_release(arena));
    FAILS(cf_msg_release(root), CF_ERR_BAD_HANDLE);
    OK(cf_schema_release(echo));
}

/* A static buffer of n (<= 65536) bytes with a fixed pattern. */
static const uint8_t *malloc_fill(size_t n) {
    static uint8_t buf[65536];
    for (size_t i = 0; i < n && i < sizeof buf; i++) buf[i] = (uint8_t)(i * 31 + 7);
    return buf;
}

static size_t recv_wait(cf_dp dp, cf_rx *out, size_t max) {
    size_t n = 0;
    for (int i = 0; i < 2000 && n == 0; i++) {
        OK(cf_dp_recv(dp, out, max, &n));
        if (n == 0) usleep(1000);
    }
    return n;
}

/* The socket datapath's MTU: the default is the apps' (CF_SOCKET_MTU), so a 4 KiB message from
 * a default sender arrives whole at a default receiver; a receiver opened with a smaller MTU
 * drops it and counts it as truncated (and says so once on stderr); bad settings are refused. */
static void test_socket_mtu(void) {
    cf_dp bad;
    cf_socket_opts opts = {0};
    opts.mtu = 100;
    FAILS(cf_dp_socket_new_opts("127.0.0.1", 0, &opts, &bad), CF_ERR_INVALID);
    opts.mtu = 70000;
    FAILS(cf_dp_socket_new_opts("127.0.0.1", 0, &opts, &bad), CF_ERR_INVALID);
    opts.mtu = 0;
    opts.max_message_len = (size_t)3 << 20;
    FAILS(cf_dp_socket_new_opts("127.0.0.1", 0, &opts, &bad), CF_ERR_TOO_LARGE);
    FAILS(cf_dp_socket_new_opts("127.0.0.1", 0, NULL, NULL), CF_ERR_NULL);

    cf_dp sender, whole, small;
    OK(cf_dp_socket_new_opts("127.0.0.1", 0, NULL, &sender)); /* NULL: the defaults */
    OK(cf_dp_socket_new("127.0.0.1", 0, &whole));
    cf_socket_opts s1500 = {0};
    s1500.mtu = 1500;
    OK(cf_dp_socket_new_opts("127.0.0.1", 0, &s1500, &small));
    uint16_t wport, sport;
    OK(cf_dp_local_port(whole, &wport));
    OK(cf_dp_local_port(small, &sport));
    uint32_t to_whole, to_small;
    OK(cf_dp_connect(sender, "127.0.0.1", wport, &to_whole));
    OK(cf_dp_connect(sender, "127.0.0.1", sport, &to_small));
    const uint8_t *big = malloc_fill(4096);
    OK(cf_dp_send_copy(sender, to_whole, 0, 1, 1, big, 4096));
    OK(cf_dp_send_copy(sender, to_small, 0, 2, 1, big, 4096));
    OK(cf_dp_flush(sender));

    cf_rx rx[2];
    CHECK(recv_wait(whole, rx, 2) == 1);
    const uint8_t *p;
    size_t len;
    OK(cf_buf_data(rx[0].data, &p, &len));
    CHECK(len == 4096 && memcmp(p, malloc_fill(4096), 4096) == 0);
    OK(cf_buf_release(rx[0].data));

    cf_dp_counters c = {0};
    for (int i = 0; i < 2000 && c.truncated == 0; i++) {
        size_t n = 0;
        OK(cf_dp_recv(small, rx, 2, &n));
        CHECK(n == 0);
        OK(cf_dp_get_counters(small, &c));
        if (c.truncated == 0) usleep(1000);
    }
    CHECK(c.truncated == 1);
    OK(cf_dp_release(sender));
    OK(cf_dp_release(whole));
    OK(cf_dp_release(small));
}

/* The NIC opens' options (cf_nic_opts): an MTU no host takes is refused before any device is
 * touched, in every build; with NULL options or a good MTU, a device that does not exist fails
 * as the plain open does (not built: CF_ERR_UNSUPPORTED; built: CF_ERR_IO naming it). */
static void test_nic_opts(void) {
    cf_dp dp = {0};
    cf_nic_opts opts = {0};
    opts.mtu = 100;
    FAILS(cf_dp_mlx5_new_opts("mlx5_cf_none", "10.0.0.1", 7000, &opts, &dp), CF_ERR_INVALID);
    CHECK(strstr(cf_last_error(), "mtu 100") != NULL);
    opts.mtu = 70000;
    FAILS(cf_dp_ice_new_opts("-l 0", "10.0.0.1", 7000, &opts, &dp), CF_ERR_INVALID);
    FAILS(cf_dp_mlx5_new_opts("mlx5_cf_none", "10.0.0.1", 7000, NULL, NULL), CF_ERR_NULL);
    opts.mtu = CF_NIC_MTU;
    enum cf_status plain = cf_dp_mlx5_new("mlx5_cf_none", "10.0.0.1", 7000, 0, 0, &dp);
    CHECK(plain == CF_ERR_UNSUPPORTED || plain == CF_ERR_IO);
    FAILS(cf_dp_mlx5_new_opts("mlx5_cf_none", "10.0.0.1", 7000, &opts, &dp), plain);
    FAILS(cf_dp_mlx5_new_opts("mlx5_cf_none", "10.0.0.1", 7000, NULL, &dp), plain);
    CHECK(dp.id == 0);
}

static void test_datapath(void) {
    cf_schema kv = load("kv.proto");
    uint32_t getm_resp, f_id, f_vals;
    OK(cf_schema_message(kv, "kv.GetMResp", &getm_resp));
    OK(cf_schema_field(kv, getm_resp, "id", &f_id));
    OK(cf_schema_field(kv, getm_resp, "vals", &f_vals));

    cf_dp server, client;
    OK(cf_dp_socket_new("127.0.0.1", 0, &server));
    OK(cf_dp_socket_new("127.0.0.1", 0, &client));
    FAILS(cf_dp_socket_new("not-an-ip", 0, &client), CF_ERR_INVALID);
    uint16_t sport, cport;
    OK(cf_dp_local_port(server, &sport));
    OK(cf_dp_local_port(client, &cport));
    int fd = -1;
    OK(cf_dp_fd(server, &fd));
    CHECK(fd >= 0);

    cf_mem smem;
    OK(cf_dp_memory(server, &smem));
    cf_arena arena;
    OK(cf_arena_new(smem, &arena));
    OK(cf_arena_set_threshold(arena, 512));

    /* client → server: a copy */
    uint32_t conn;
    OK(cf_dp_connect(client, "127.0.0.1", sport, &conn));
    const uint64_t inc = 0x1234567890abcdefULL; /* the client's incarnation */
    OK(cf_dp_send_copy(client, conn, inc, 5, 9, (const uint8_t *)"hello", 5));
    OK(cf_dp_flush(client));
    cf_rx rx[8];
    size_t n = recv_wait(server, rx, 8);
    CHECK(n == 1);
    if (n != 1) return;
    CHECK(rx[0].msg_id == 5 && rx[0].msg_type == 9 && rx[0].peer_port == cport);
    CHECK(rx[0].incarnation == inc);
    CHECK(rx[0].peer_ip == 0x7f000001);
    const uint8_t *p;
    size_t len;
    OK(cf_buf_data(rx[0].data, &p, &len));
    CHECK(len == 5 && memcmp(p, "hello", 5) == 0);

    /* client → server: two pinned buffers as scatter-gather entries, received as one message */
    {
        cf_mem m;
        OK(cf_dp_memory(client, &m));
        cf_buf parts[2];
        OK(cf_buf_alloc(m, (const uint8_t *)"scatter-", 8, &parts[0]));
        OK(cf_buf_alloc(m, (const uint8_t *)"gather", 6, &parts[1]));
        OK(cf_dp_send_bufs(client, conn, 0, 6, 9, parts, 2));
        OK(cf_buf_release(parts[0])); /* the send holds its own references */
        OK(cf_buf_release(parts[1]));
        FAILS(cf_dp_send_bufs(client, conn, 0, 6, 9, parts, 2), CF_ERR_BAD_HANDLE);
        FAILS(cf_dp_send_bufs(client, conn, 0, 6, 9, NULL, 2), CF_ERR_NULL);
        OK(cf_dp_flush(client));
        OK(cf_mem_release(m));
        cf_rx r2[2];
        CHECK(recv_wait(server, r2, 2) == 1);
        OK(cf_buf_data(r2[0].data, &p, &len));
        CHECK(r2[0].msg_id == 6 && len == 14 && memcmp(p, "scatter-gather", 14) == 0);
        CHECK(r2[0].incarnation == 0); /* sent without one */
        OK(cf_buf_release(r2[0].data));
    }

    /* server → client: a message with one copied and two referenced values */
    uint8_t big[4000];
    for (size_t i = 0; i < sizeof big; i++) big[i] = (uint8_t)(i % 251);
    cf_buf v1, v2;
    OK(cf_buf_alloc(smem, big, 2048, &v1));
    OK(cf_buf_alloc(smem, big + 100, 3000, &v2));
    cf_msg reply;
    OK(cf_msg_new(arena, kv, getm_resp, &reply));
    OK(cf_msg_set_uint(reply, f_id, 42));
    OK(cf_msg_append_bytes(reply, f_vals, (const uint8_t *)"tiny", 4));
    OK(cf_msg_append_buf(reply, f_vals, v1));
    OK(cf_msg_append_buf(reply, f_vals, v2));
    OK(cf_dp_send_msg(server, rx[0].conn, rx[0].incarnation, rx[0].msg_id, 10, reply));
    OK(cf_buf_release(v1)); /* the message and the send hold their own references */
    OK(cf_arena_reset(arena));
    OK(cf_dp_flush(server));
    OK(cf_buf_release(rx[0].data));
    FAILS(cf_dp_send_msg(server, 999, 0, 1, 1, reply), CF_ERR_BAD_HANDLE); /* reset away */

    n = recv_wait(client, rx, 8);
    CHECK(n == 1);
    if (n != 1) return;
    CHECK(rx[0].msg_id == 5 && rx[0].msg_type == 10 && rx[0].incarnation == inc);
    cf_arena carena;
    cf_mem cmem;
    OK(cf_dp_memory(client, &cmem));
    OK(cf_arena_new(cmem, &carena));
    cf_msg got;
    OK(cf_msg_decode_buf(carena, kv, getm_resp, rx[0].data, &got));
    OK(cf_buf_release(rx[0].data)); /* the message keeps the packet */
    uint64_t id;
    OK(cf_msg_get_uint(got, f_id, &id));
    CHECK(id == 42);
    size_t count;
    OK(cf_msg_count(got, f_vals, &count));
    CHECK(count == 3);
    OK(cf_msg_get_bytes_at(got, f_vals, 0, &p, &len));
    CHECK(len == 4 && memcmp(p, "tiny", 4) == 0);
    OK(cf_msg_get_bytes_at(got, f_vals, 1, &p, &len));
    CHECK(len == 2048 && memcmp(p, big, 2048) == 0);
    OK(cf_msg_get_bytes_at(got, f_vals, 2, &p, &len));
    CHECK(len == 3000 && memcmp(p, big + 100, 3000) == 0);

    /* larger messages: a datapath sized for them, segmented and reassembled */
    {
        cf_dp big_a, big_b;
        FAILS(cf_dp_socket_new_sized("127.0.0.1", 0, (size_t)3 << 20, &big_a), CF_ERR_TOO_LARGE);
        FAILS(cf_dp_send_copy(client, conn, 0, 1, 1, malloc_fill(40000), 40000), CF_ERR_TOO_LARGE);
        OK(cf_dp_socket_new_sized("127.0.0.1", 0, 65536, &big_a));
        OK(cf_dp_socket_new_sized("127.0.0.1", 0, 65536, &big_b));
        uint16_t bport;
        uint32_t bconn;
        OK(cf_dp_local_port(big_b, &bport));
        OK(cf_dp_connect(big_a, "127.0.0.1", bport, &bconn));
        OK(cf_dp_send_copy(big_a, bconn, 0, 3, 4, malloc_fill(40000), 40000));
        OK(cf_dp_flush(big_a));
        cf_rx r3;
        CHECK(recv_wait(big_b, &r3, 1) == 1);
        OK(cf_buf_data(r3.data, &p, &len));
        CHECK(len == 40000 && memcmp(p, malloc_fill(40000), 40000) == 0);
        OK(cf_buf_release(r3.data));
        OK(cf_dp_release(big_a));
        OK(cf_dp_release(big_b));
    }

    /* sending on an unknown connection */
    FAILS(cf_dp_send_copy(server, 12345, 0, 1, 1, (const uint8_t *)"x", 1), CF_ERR_INVALID);

    /* malformed datagrams from a plain socket: counted, dropped, nothing delivered */
    int s = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in to = {0};
    to.sin_family = AF_INET;
    to.sin_port = htons(sport);
    to.sin_addr.s_addr = htonl(0x7f000001);
    srand(7);
    for (int i = 0; i < 200; i++) {
        uint8_t junk[64];
        size_t jl = (size_t)(rand() % (int)sizeof junk);
        for (size_t k = 0; k < jl; k++) junk[k] = (uint8_t)rand();
        sendto(s, junk, jl, 0, (struct sockaddr *)&to, sizeof to);
    }
    close(s);
    usleep(50000);
    cf_dp_counters before, after;
    OK(cf_dp_get_counters(server, &before));
    size_t got_n = 0, total = 0;
    for (int i = 0; i < 50; i++) {
        OK(cf_dp_recv(server, rx, 8, &got_n));
        for (size_t k = 0; k < got_n; k++) OK(cf_buf_release(rx[k].data));
        total += got_n;
        usleep(1000);
    }
    OK(cf_dp_get_counters(server, &after));
    CHECK(after.total_drops > before.total_drops);
    CHECK(after.delivered - before.delivered == total);
    printf("malformed datagrams: %zu delivered (random bytes that frame validly), %llu dropped\n",
           total, (unsigned long long)(after.total_drops - before.total_drops));

    OK(cf_buf_release(v2));
    OK(cf_arena_release(carena));
    OK(cf_arena_release(arena));
    OK(cf_mem_release(cmem));
    OK(cf_mem_release(smem));
    OK(cf_dp_release(client));
    OK(cf_dp_release(server));
    OK(cf_schema_release(kv));
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s SCHEMA_DIR\n", argv[0]);
        return 2;
    }
    schema_dir = argv[1];
    printf("cornflakes C API %s\n", cf_version());
    test_buffers();
    test_other_thread();
    test_reused_slot();
    test_messages();
    test_nested();
    test_datapath();
    test_socket_mtu();
    test_nic_opts();
    printf("%d passed, %d failed\n", checks - failures, failures);
    return failures == 0 ? 0 : 1;
}
