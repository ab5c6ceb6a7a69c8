/*
 * A functional test of redis-cornflakes over its Cornflakes UDP port, written against the C
 * API: SET, GET, MGET, RPUSH, LRANGE, APPEND, DEL in the format the server speaks, a value that
 * is referenced from pinned memory, APPEND copying it, and malformed requests answered or
 * dropped while the server keeps serving. Run by apps/redis-cornflakes/test/run.sh.
 *
 * Usage: functional resp|cornflakes PORT SCHEMA_DIR [SERVER_IP [BIND_IP]]
 *   (default 127.0.0.1 for both; run.sh's AF_XDP test gives the server's address on a veth)
 */
#include "cornflakes.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int failures = 0, checks = 0;
#define CHECK(c)                                                                         \
    do {                                                                                 \
        checks++;                                                                        \
        if (!(c)) {                                                                      \
            failures++;                                                                  \
            fprintf(stderr, "%s:%d: CHECK failed: %s (%s)\n", __FILE__, __LINE__, #c,    \
                    cf_last_error());                                                    \
        }                                                                                \
    } while (0)

static cf_dp dp;
static uint32_t conn, next_id = 1;
/* This client's incarnation (framing v2): every reply must carry it back. */
static const uint64_t incarnation = 0x7ed15c0ffee0001ULL;
static cf_schema kv;
static cf_arena arena;

/* Sends bytes with message type `ty`, waits for the reply (up to 2 s); returns its buffer
 * handle ({0} on timeout). */
static cf_buf roundtrip_copy(uint16_t ty, const void *p, size_t n) {
    uint32_t id = next_id++;
    CHECK(cf_dp_send_copy(dp, conn, incarnation, id, ty, p, n) == CF_OK);
    CHECK(cf_dp_flush(dp) == CF_OK);
    cf_rx rx;
    size_t got = 0;
    for (int i = 0; i < 2000; i++) {
        cf_dp_recv(dp, &rx, 1, &got);
        if (got) break;
        usleep(1000);
    }
    cf_buf none = {0};
    if (!got) return none;
    CHECK(rx.msg_id == id && rx.msg_type == ty && rx.incarnation == incarnation);
    return rx.data;
}

static int reply_is(cf_buf b, const char *want) {
    const uint8_t *p;
    size_t n;
    if (!b.id || cf_buf_data(b, &p, &n) != CF_OK) return 0;
    int ok = n == strlen(want) && memcmp(p, want, n) == 0;
    if (!ok) fprintf(stderr, "reply: %.*s\nwant:  %s\n", (int)(n > 200 ? 200 : n), p, want);
    cf_buf_release(b);
    return ok;
}

static void resp_cmd(char *out, size_t cap, int argc, const char **argv, const size_t *lens, size_t *len) {
    size_t at = (size_t)snprintf(out, cap, "*%d\r\n", argc);
    for (int i = 0; i < argc; i++) {
        at += (size_t)snprintf(out + at, cap - at, "$%zu\r\n", lens[i]);
        memcpy(out + at, argv[i], lens[i]);
        at += lens[i];
        memcpy(out + at, "\r\n", 2);
        at += 2;
    }
    *len = at;
}

static char big[3000], big2[3000 + 5];

static void test_resp(void) {
    char buf[8192];
    size_t len;
    const char *set[] = {"SET", "cf:big", big};
    size_t set_l[] = {3, 6, sizeof big};
    resp_cmd(buf, sizeof buf, 3, set, set_l, &len);
    CHECK(reply_is(roundtrip_copy(2, buf, len), "+OK\r\n"));
    const char *get[] = {"GET", "cf:big"};
    size_t get_l[] = {3, 6};
    resp_cmd(buf, sizeof buf, 2, get, get_l, &len);
    char want[4096];
    snprintf(want, sizeof want, "$%zu\r\n%.*s\r\n", sizeof big, (int)sizeof big, big);
    CHECK(reply_is(roundtrip_copy(1, buf, len), want));
    const char *app[] = {"APPEND", "cf:big", "tail!"};
    size_t app_l[] = {6, 6, 5};
    resp_cmd(buf, sizeof buf, 3, app, app_l, &len);
    snprintf(want, sizeof want, ":%zu\r\n", sizeof big + 5);
    CHECK(reply_is(roundtrip_copy(7, buf, len), want));
    resp_cmd(buf, sizeof buf, 2, get, get_l, &len);
    snprintf(want, sizeof want, "$%zu\r\n%.*s\r\n", sizeof big2, (int)sizeof big2, big2);
    CHECK(reply_is(roundtrip_copy(1, buf, len), want));
    const char *push[] = {"RPUSH", "cf:list", "a", "bb"};
    size_t push_l[] = {5, 7, 1, 2};
    resp_cmd(buf, sizeof buf, 4, push, push_l, &len);
    CHECK(reply_is(roundtrip_copy(7, buf, len), ":2\r\n"));
    const char *lr[] = {"LRANGE", "cf:list", "0", "-1"};
    size_t lr_l[] = {6, 7, 1, 2};
    resp_cmd(buf, sizeof buf, 4, lr, lr_l, &len);
    CHECK(reply_is(roundtrip_copy(5, buf, len), "*2\r\n$1\r\na\r\n$2\r\nbb\r\n"));
    const char *mg[] = {"MGET", "cf:big", "cf:none"};
    size_t mg_l[] = {4, 6, 7};
    resp_cmd(buf, sizeof buf, 3, mg, mg_l, &len);
    snprintf(want, sizeof want, "*2\r\n$%zu\r\n%.*s\r\n$-1\r\n", sizeof big2, (int)sizeof big2, big2);
    CHECK(reply_is(roundtrip_copy(3, buf, len), want));
    /* Redis's own errors */
    const char *wrong[] = {"GET", "cf:list"};
    size_t wrong_l[] = {3, 7};
    resp_cmd(buf, sizeof buf, 2, wrong, wrong_l, &len);
    CHECK(reply_is(roundtrip_copy(1, buf, len),
                   "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"));
    const char *arity[] = {"GET"};
    size_t arity_l[] = {3};
    resp_cmd(buf, sizeof buf, 1, arity, arity_l, &len);
    CHECK(reply_is(roundtrip_copy(1, buf, len), "-ERR wrong number of arguments for 'get' command\r\n"));
    const char *no[] = {"FLUSHALL"};
    size_t no_l[] = {8};
    resp_cmd(buf, sizeof buf, 1, no, no_l, &len);
    CHECK(reply_is(roundtrip_copy(1, buf, len), "-ERR command 'FLUSHALL' is not served on the Cornflakes port\r\n"));
    /* malformed RESP */
    CHECK(reply_is(roundtrip_copy(1, "*2\r\n$3\r\nGET\r\n$99\r\nab\r\n", 22),
                   "-ERR malformed RESP request on the Cornflakes port\r\n"));
    CHECK(reply_is(roundtrip_copy(1, "garbage", 7), "-ERR malformed RESP request on the Cornflakes port\r\n"));
    const char *del[] = {"DEL", "cf:big", "cf:list"};
    size_t del_l[] = {3, 6, 7};
    resp_cmd(buf, sizeof buf, 3, del, del_l, &len);
    CHECK(reply_is(roundtrip_copy(8, buf, len), ":2\r\n"));
}

static uint32_t T(const char *name) {
    uint32_t t = 0;
    CHECK(cf_schema_message(kv, name, &t) == CF_OK);
    return t;
}
static uint32_t F(uint32_t t, const char *name) {
    uint32_t f = 0;
    CHECK(cf_schema_field(kv, t, name, &f) == CF_OK);
    return f;
}

/* Sends a message of type `ty` and decodes the reply as `resp_type`. */
static cf_msg call(uint16_t ty, cf_msg req, uint32_t resp_type) {
    uint32_t id = next_id++;
    cf_msg none = {0};
    CHECK(cf_dp_send_msg(dp, conn, incarnation, id, ty, req) == CF_OK);
    CHECK(cf_dp_flush(dp) == CF_OK);
    cf_rx rx;
    size_t got = 0;
    for (int i = 0; i < 2000 && !got; i++) {
        cf_dp_recv(dp, &rx, 1, &got);
        if (!got) usleep(1000);
    }
    CHECK(got == 1);
    if (!got) return none;
    CHECK(rx.msg_id == id && rx.incarnation == incarnation);
    cf_msg m;
    CHECK(cf_msg_decode_buf(arena, kv, resp_type, rx.data, &m) == CF_OK);
    cf_buf_release(rx.data);
    return m;
}

static cf_msg req(uint32_t t, const char *key, const void *val, size_t vlen) {
    cf_msg m;
    CHECK(cf_msg_new(arena, kv, t, &m) == CF_OK);
    CHECK(cf_msg_set_uint(m, F(t, "id"), next_id) == CF_OK);
    if (key) CHECK(cf_msg_set_bytes(m, F(t, "key"), (const uint8_t *)key, strlen(key)) == CF_OK);
    if (val) CHECK(cf_msg_set_bytes(m, F(t, "val"), val, vlen) == CF_OK);
    return m;
}

static int64_t status_of(cf_msg m, uint32_t t) {
    int64_t s = -1;
    CHECK(cf_msg_get_int(m, F(t, "status"), &s) == CF_OK);
    return s;
}

static int bytes_are(cf_msg m, uint32_t f, long i, const void *want, size_t n) {
    const uint8_t *p;
    size_t len;
    cf_status st = i < 0 ? cf_msg_get_bytes(m, f, &p, &len) : cf_msg_get_bytes_at(m, f, (size_t)i, &p, &len);
    return st == CF_OK && len == n && memcmp(p, want, n) == 0;
}

static void test_objects(void) {
    uint32_t put = T("kv.PutReq"), putr = T("kv.PutResp"), get = T("kv.GetReq"), getr = T("kv.GetResp");
    uint32_t getm = T("kv.GetMReq"), getmr = T("kv.GetMResp"), gl = T("kv.GetListReq"), glr = T("kv.GetListResp");
    uint32_t ap = T("kv.AppendReq"), apr = T("kv.AppendResp"), del = T("kv.DeleteReq"), delr = T("kv.DeleteResp");
    cf_msg r = call(2, req(put, "cf:big", big, sizeof big), putr);
    CHECK(status_of(r, putr) == 0);
    r = call(1, req(get, "cf:big", NULL, 0), getr);
    CHECK(status_of(r, getr) == 0);
    CHECK(bytes_are(r, F(getr, "val"), -1, big, sizeof big));
    uint64_t id = 0;
    CHECK(cf_msg_get_uint(r, F(getr, "id"), &id) == CF_OK && id == next_id - 1);
    r = call(7, req(ap, "cf:big", "tail!", 5), apr); /* APPEND: copies the pinned value */
    CHECK(status_of(r, apr) == 0);
    r = call(1, req(get, "cf:big", NULL, 0), getr);
    CHECK(bytes_are(r, F(getr, "val"), -1, big2, sizeof big2));
    r = call(1, req(get, "cf:none", NULL, 0), getr);
    CHECK(status_of(r, getr) == 1);
    r = call(7, req(ap, "cf:list", NULL, 0), apr); /* creates a string "" (APPEND) */
    CHECK(status_of(r, apr) == 0);
    r = call(8, req(del, "cf:list", NULL, 0), delr);
    CHECK(status_of(r, delr) == 0);
    r = call(8, req(del, "cf:list", NULL, 0), delr);
    CHECK(status_of(r, delr) == 1);
    /* a list through the TCP side is what RPUSH makes; here RPUSH runs for an existing list */
    cf_msg m;
    CHECK(cf_msg_new(arena, kv, getm, &m) == CF_OK);
    CHECK(cf_msg_append_bytes(m, F(getm, "keys"), (const uint8_t *)"cf:big", 6) == CF_OK);
    CHECK(cf_msg_append_bytes(m, F(getm, "keys"), (const uint8_t *)"cf:none", 7) == CF_OK);
    r = call(3, m, getmr);
    CHECK(status_of(r, getmr) == 1);
    CHECK(bytes_are(r, F(getmr, "vals"), 0, big2, sizeof big2));
    int64_t s1 = -1;
    CHECK(cf_msg_get_int_at(r, F(getmr, "statuses"), 1, &s1) == CF_OK && s1 == 1);
    r = call(5, req(gl, "cf:big", NULL, 0), glr); /* a string, not a list */
    CHECK(status_of(r, glr) == 5);
    /* malformed: undecodable object and unknown type are dropped; the server still answers */
    uint8_t junk[40];
    memset(junk, 0xee, sizeof junk);
    CHECK(cf_dp_send_copy(dp, conn, incarnation, next_id++, 1, junk, sizeof junk) == CF_OK);
    CHECK(cf_dp_send_copy(dp, conn, incarnation, next_id++, 77, junk, sizeof junk) == CF_OK);
    CHECK(cf_dp_flush(dp) == CF_OK);
    usleep(100000);
    r = call(1, req(get, "cf:big", NULL, 0), getr); /* the junk got no reply: this is the next */
    CHECK(bytes_are(r, F(getr, "val"), -1, big2, sizeof big2));
    r = call(8, req(del, "cf:big", NULL, 0), delr);
    CHECK(status_of(r, delr) == 0);
    /* LRANGE of cf:biglist, which run.sh made over TCP (RPUSH of 600 'a', 2000 'b', "small"):
     * the two long elements live in pinned memory and are sent by reference (run.sh counts
     * them in INFO); then RPUSH (APPEND on a list) of a 3000-byte element over this port. */
    static char as[600], bs[2000];
    memset(as, 'a', sizeof as);
    memset(bs, 'b', sizeof bs);
    uint32_t vals = F(glr, "vals");
    size_t count = 0;
    r = call(5, req(gl, "cf:biglist", NULL, 0), glr);
    CHECK(status_of(r, glr) == 0);
    CHECK(cf_msg_count(r, vals, &count) == CF_OK && count == 3);
    CHECK(bytes_are(r, vals, 0, as, sizeof as));
    CHECK(bytes_are(r, vals, 1, bs, sizeof bs));
    CHECK(bytes_are(r, vals, 2, "small", 5));
    r = call(7, req(ap, "cf:biglist", big, sizeof big), apr);
    CHECK(status_of(r, apr) == 0);
    r = call(5, req(gl, "cf:biglist", NULL, 0), glr);
    CHECK(cf_msg_count(r, vals, &count) == CF_OK && count == 4);
    CHECK(bytes_are(r, vals, 1, bs, sizeof bs));
    CHECK(bytes_are(r, vals, 3, big, sizeof big));
    cf_arena_reset(arena);
}

int main(int argc, char **argv) {
    if (argc < 4 || argc > 6) {
        fprintf(stderr, "usage: %s resp|cornflakes PORT SCHEMA_DIR [SERVER_IP [BIND_IP]]\n", argv[0]);
        return 2;
    }
    for (size_t i = 0; i < sizeof big; i++) big[i] = (char)('a' + i % 26);
    memcpy(big2, big, sizeof big);
    memcpy(big2 + sizeof big, "tail!", 5);
    char path[4096];
    snprintf(path, sizeof path, "%s/kv.proto", argv[3]);
    const char *server_ip = argc > 4 ? argv[4] : "127.0.0.1", *bind_ip = argc > 5 ? argv[5] : "127.0.0.1";
    /* Against a server on a NIC datapath (a server address given: AF_XDP or DPDK on veth), the
     * NIC's MTU; against the socket server on loopback, the socket default. */
    cf_socket_opts opts = {0};
    opts.mtu = argc > 4 ? CF_NIC_MTU : 0;
    if (cf_schema_load(path, argv[3], &kv) != CF_OK || cf_dp_socket_new_opts(bind_ip, 0, &opts, &dp) != CF_OK ||
        cf_dp_connect(dp, server_ip, (uint16_t)atoi(argv[2]), &conn) != CF_OK) {
        fprintf(stderr, "setup: %s\n", cf_last_error());
        return 2;
    }
    cf_mem none = {0};
    cf_arena_new(none, &arena);
    if (!strcmp(argv[1], "resp")) test_resp();
    else test_objects();
    printf("%d passed, %d failed\n", checks - failures, failures);
    return failures ? 1 : 0;
}
