/* cornflakes.c: redis-server also listens on the Cornflakes UDP stack (the socket datapath of
 * crates/cornflakes-c) and serves GET, MGET and LRANGE, plus SET, APPEND, RPUSH and DEL to load,
 * as in the Cornflakes paper's section 6.2.2.
 *
 * Configuration (redis.conf or command line):
 *   cornflakes-port N         UDP port (0, the default: off; -1: any free port, for tests)
 *   cornflakes-bind IP        address to bind (default 127.0.0.1)
 *   cornflakes-schema PATH    kv.proto of the Cornflakes repository (schemas/kv.proto)
 *   cornflakes-format F       "resp": requests and replies are RESP, each request one UDP
 *                             message (the baseline: Redis's own serialization);
 *                             "cornflakes": kv.proto objects, the message type naming the
 *                             operation (1 get, 2 put/SET, 3 getm/MGET, 5 getlist/LRANGE,
 *                             7 append: RPUSH on a list, APPEND otherwise, 8 delete/DEL)
 *   cornflakes-threshold N    string values at least N bytes long live in pinned memory and are
 *                             sent by reference (default 512)
 *
 * Values: SET (any client, TCP or Cornflakes) stores a string of at least the threshold in a
 * pinned buffer allocated through the C API, with an sds header in front so every Redis code
 * path reads it as an ordinary raw string. Such a value is never changed in place: SET replaces
 * it, and APPEND, SETRANGE, SETBIT and the other writers copy it to the heap first
 * (dbUnshareStringValue), whether or not a send still references it; the pinned buffer is
 * released when Redis frees the string, and the memory is reused only after the last send
 * holding it has completed (reference counts in the C API). List elements live in quicklist
 * nodes and are copied into replies.
 *
 * Bad input on the Cornflakes port (undecodable objects, unknown types, malformed RESP, wrong
 * key types) is counted (INFO "cornflakes" section) and answered with an error status or RESP
 * error, never a crash. */

#include "server.h"
#include "cornflakes.h"

#include <pthread.h>

#define CF_BURST 32
#define CF_MAX_ARGS 1024
/* Largest request or reply, and largest pinned value (with its sds header): 256 KiB, as the
 * Cornflakes KV store's default --max-item. Longer values stay on the heap and are copied. */
#define CF_MAX_MESSAGE (256 << 10)

enum { OP_GET = 1, OP_PUT = 2, OP_GETM = 3, OP_GETLIST = 5, OP_APPEND = 7, OP_DELETE = 8, OP_MAX = 9 };
enum { ST_OK = 0, ST_NOT_FOUND = 1, ST_TOO_LARGE = 3, ST_BAD_REQUEST = 5 };

/* Field indices of the kv.proto messages used (looked up by name at start-up). */
typedef struct {
    uint32_t req, resp;           /* message types */
    uint32_t req_key, req_keys, req_val;
    uint32_t resp_id, resp_val, resp_vals, resp_status, resp_statuses;
} cfOp;

static struct {
    int on, resp_format;
    pthread_t main_thread;
    cf_dp dp;
    const char *kind;             /* the datapath: socket, xdp, mlx5 or ice */
    cf_mem mem;
    cf_arena arena;
    cf_schema kv;
    cfOp ops[OP_MAX];
    uint32_t req_id_field;
    size_t max_pinned;
    dict *pinned;                 /* pinned sds or list element -> cf_buf handle */
    client *fake;                 /* runs the commands of the Cornflakes port */
    /* pinned strings and list elements freed on another thread (lazy free), released on the
     * main thread */
    pthread_mutex_t orphan_lock;
    struct orphan { void *p; int element; } *orphans;
    size_t norphans, orphans_cap;
    /* counters (INFO cornflakes) */
    long long requests, replies, malformed, send_errors, pinned_values, pinned_bytes,
        pinned_failures, zero_copy_sends, copied_sends, pinned_elements, pinned_element_bytes;
} cf;

/* ---------------------------------------------------------------- pinned strings */

static uint64_t ptrHash(const void *key) {
    return dictGenHashFunction(&key, sizeof(key));
}

static dictType pinnedDictType = {
    ptrHash, NULL, NULL, NULL, NULL, NULL, NULL, NULL
};

static void cfLog(const char *what) {
    serverLog(LL_WARNING, "cornflakes: %s: %s", what, cf_last_error());
}

/* Whether `s` lives in pinned memory. SDS_TYPE_5 keeps its length in the flag bits, so the
 * pinned bit means something only for the other types (pinned strings are never type 5). */
int cfSdsIsPinned(const sds s) {
    if (s == NULL) return 0;
    unsigned char flags = (unsigned char)s[-1];
    return (flags & SDS_TYPE_MASK) != SDS_TYPE_5 && (flags & SDS_PINNED) != 0;
}

static void releasePinned(sds s) {
    dictEntry *de = dictFind(cf.pinned, s);
    serverAssert(de != NULL);
    cf_buf b = { (uint64_t)(uintptr_t)dictGetVal(de) };
    cf.pinned_values--;
    cf.pinned_bytes -= sdslen(s);
    dictDelete(cf.pinned, s);
    if (cf_buf_release(b) != CF_OK) cfLog("releasing a pinned value");
}

static void releasePinnedElement(unsigned char *p) {
    dictEntry *de = dictFind(cf.pinned, p);
    serverAssert(de != NULL);
    cf_buf b = { (uint64_t)(uintptr_t)dictGetVal(de) };
    const uint8_t *data;
    size_t n = 0;
    if (cf_buf_data(b, &data, &n) != CF_OK) cfLog("a pinned list element");
    cf.pinned_elements--;
    cf.pinned_element_bytes -= (long long)n;
    dictDelete(cf.pinned, p);
    if (cf_buf_release(b) != CF_OK) cfLog("releasing a pinned list element");
}

/* Releases pinned memory now on the main thread, or queues it for the main thread when a
 * background thread frees it (the C API's handles belong to the main thread). */
static void releaseOrQueue(void *p, int element) {
    if (pthread_equal(pthread_self(), cf.main_thread)) {
        if (element) releasePinnedElement(p);
        else releasePinned(p);
        return;
    }
    pthread_mutex_lock(&cf.orphan_lock);
    if (cf.norphans == cf.orphans_cap) {
        cf.orphans_cap = cf.orphans_cap ? cf.orphans_cap * 2 : 64;
        cf.orphans = zrealloc(cf.orphans, cf.orphans_cap * sizeof(*cf.orphans));
    }
    cf.orphans[cf.norphans].p = p;
    cf.orphans[cf.norphans].element = element;
    cf.norphans++;
    pthread_mutex_unlock(&cf.orphan_lock);
}

/* sds.c calls this for every sdsfree: 1 when the string was pinned (released here, or queued
 * for the main thread when freed by a background thread), 0 to free it normally. */
static int cfSdsFreeHook(sds s) {
    if (!cfSdsIsPinned(s)) return 0;
    releaseOrQueue(s, 0);
    return 1;
}

static void drainOrphans(void) {
    if (!cf.on || cf.norphans == 0) return;
    pthread_mutex_lock(&cf.orphan_lock);
    for (size_t i = 0; i < cf.norphans; i++) {
        if (cf.orphans[i].element) releasePinnedElement(cf.orphans[i].p);
        else releasePinned(cf.orphans[i].p);
    }
    cf.norphans = 0;
    pthread_mutex_unlock(&cf.orphan_lock);
}

/* quicklist.c's plain nodes (elements at least list's packed threshold long, set to ours in
 * cfInit): a list element at least the threshold long is copied into a pinned buffer of its
 * own, to be sent by reference (LRANGE). NULL: the heap (too long, pinned memory exhausted, or
 * not on the main thread). quicklist never writes such an entry in place: LSET replaces it,
 * compression (list-compress-depth) moves it to the heap, deleting it releases it here. */
static unsigned char *cfListElementAlloc(const void *value, size_t sz) {
    if (sz < (size_t)server.cornflakes_threshold || sz > cf.max_pinned ||
        !pthread_equal(pthread_self(), cf.main_thread))
        return NULL;
    cf_buf b;
    if (cf_buf_alloc(cf.mem, value, sz, &b) != CF_OK) {
        cf.pinned_failures++;
        return NULL;
    }
    const uint8_t *data;
    size_t n;
    serverAssert(cf_buf_data(b, &data, &n) == CF_OK && n == sz);
    serverAssert(dictAdd(cf.pinned, (void *)data, (void *)(uintptr_t)b.id) == DICT_OK);
    cf.pinned_elements++;
    cf.pinned_element_bytes += (long long)sz;
    return (unsigned char *)data;
}

static void cfListElementFree(unsigned char *entry) {
    releaseOrQueue(entry, 1);
}

/* A raw string object holding a copy of p[0..len] in pinned memory, or NULL (too long for one
 * pinned buffer, pinned memory exhausted): the caller keeps the heap string then. */
static robj *pinnedStringObject(const char *p, size_t len) {
    char type = len < 0xffff ? SDS_TYPE_16 : SDS_TYPE_32;
    size_t hdr = type == SDS_TYPE_16 ? sizeof(struct sdshdr16) : sizeof(struct sdshdr32);
    size_t total = hdr + len + 1;
    if (total > cf.max_pinned) return NULL;
    /* One pinned buffer: sds header, the bytes, the terminating NUL. Built on the heap, then
     * copied in (buffers are immutable once allocated). */
    char *img = zmalloc(total);
    if (type == SDS_TYPE_16) {
        struct sdshdr16 *sh = (void *)img;
        sh->len = sh->alloc = (uint16_t)len;
    } else {
        struct sdshdr32 *sh = (void *)img;
        sh->len = sh->alloc = (uint32_t)len;
    }
    img[hdr - 1] = (char)(type | SDS_PINNED);
    memcpy(img + hdr, p, len);
    img[hdr + len] = '\0';
    cf_buf b;
    cf_status st = cf_buf_alloc(cf.mem, (const uint8_t *)img, total, &b);
    zfree(img);
    if (st != CF_OK) {
        cf.pinned_failures++;
        return NULL;
    }
    const uint8_t *data;
    size_t n;
    serverAssert(cf_buf_data(b, &data, &n) == CF_OK && n == total);
    sds s = (sds)(data + hdr);
    serverAssert(dictAdd(cf.pinned, s, (void *)(uintptr_t)b.id) == DICT_OK);
    cf.pinned_values++;
    cf.pinned_bytes += len;
    return createObject(OBJ_STRING, s);
}

/* The value SET stores: `val` itself (one more reference), or a pinned copy of it when the
 * Cornflakes port is on and the value is at least the threshold long. */
robj *cfStoredStringValue(robj *val) {
    if (cf.on && val->type == OBJ_STRING && sdsEncodedObject(val) &&
        sdslen(val->ptr) >= (size_t)server.cornflakes_threshold && !cfSdsIsPinned(val->ptr)) {
        robj *p = pinnedStringObject(val->ptr, sdslen(val->ptr));
        if (p) return p;
    }
    incrRefCount(val);
    return val;
}

/* ---------------------------------------------------------------- running commands */

/* Runs one command on the fake client and leaves its RESP reply in *out (an sds the caller
 * frees). argv's objects are consumed. */
static sds runCommand(robj **argv, int argc) {
    client *c = cf.fake;
    c->argv = zmalloc(sizeof(robj *) * argc);
    memcpy(c->argv, argv, sizeof(robj *) * argc);
    c->argc = c->argv_len = argc;
    client *old = server.current_client;
    server.current_client = c;
    processCommand(c);
    server.current_client = old;
    sds proto = sdsnewlen(c->buf, c->bufpos);
    c->bufpos = 0;
    while (listLength(c->reply)) {
        clientReplyBlock *o = listNodeValue(listFirst(c->reply));
        proto = sdscatlen(proto, o->buf, o->used);
        listDelNode(c->reply, listFirst(c->reply));
    }
    c->reply_bytes = 0;
    resetClient(c);
    return proto;
}

static const char *allowed[] = {"get", "set", "mget", "lrange", "rpush", "append", "del", "lindex", NULL};

static int commandAllowed(robj *name) {
    for (int i = 0; allowed[i]; i++)
        if (!strcasecmp(name->ptr, allowed[i])) return 1;
    return 0;
}

/* ---------------------------------------------------------------- RESP format */

/* Parses one RESP array of bulk strings; returns argc, or -1 when malformed. */
static int parseResp(const uint8_t *p, size_t len, robj **argv) {
    size_t at = 0;
#define LINE_NUM(prefix, out)                                                   \
    do {                                                                        \
        if (at >= len || p[at] != (prefix)) return -1;                          \
        at++;                                                                   \
        long long v_ = 0;                                                       \
        int digits_ = 0;                                                        \
        while (at < len && p[at] >= '0' && p[at] <= '9' && digits_ < 12) {     \
            v_ = v_ * 10 + (p[at++] - '0');                                     \
            digits_++;                                                          \
        }                                                                       \
        if (!digits_ || at + 1 >= len || p[at] != '\r' || p[at + 1] != '\n') return -1; \
        at += 2;                                                                \
        (out) = v_;                                                             \
    } while (0)
    long long argc;
    LINE_NUM('*', argc);
    if (argc < 1 || argc > CF_MAX_ARGS) return -1;
    for (long long i = 0; i < argc; i++) {
        long long n;
        LINE_NUM('$', n);
        if ((size_t)n > len - at || len - at - (size_t)n < 2 || p[at + n] != '\r' ||
            p[at + n + 1] != '\n') {
            for (long long j = 0; j < i; j++) decrRefCount(argv[j]);
            return -1;
        }
        argv[i] = createStringObject((const char *)p + at, n);
        at += n + 2;
    }
#undef LINE_NUM
    if (at != len) {
        for (long long j = 0; j < argc; j++) decrRefCount(argv[j]);
        return -1;
    }
    return (int)argc;
}

static void sendCopy(const cf_rx *rx, const char *p, size_t n) {
    /* The reply carries the request's incarnation, id and type (docs/wire-format.md). */
    if (cf_dp_send_copy(cf.dp, rx->conn, rx->incarnation, rx->msg_id, rx->msg_type,
                        (const uint8_t *)p, n) == CF_ERR_AGAIN) {
        cf_dp_flush(cf.dp);
        if (cf_dp_send_copy(cf.dp, rx->conn, rx->incarnation, rx->msg_id, rx->msg_type,
                            (const uint8_t *)p, n) != CF_OK) {
            cf.send_errors++;
            return;
        }
    }
    cf.replies++;
}

/* Not inlined (nor serveObject): each is one request's reply path, which callgrind counts by
 * name (--toggle-collect=serveResp, docs/performance.md "Redis"); one call per request. */
static __attribute__((noinline)) void serveResp(const cf_rx *rx, const uint8_t *p, size_t len) {
    robj *argv[CF_MAX_ARGS];
    int argc = parseResp(p, len, argv);
    if (argc < 0) {
        cf.malformed++;
        static const char err[] = "-ERR malformed RESP request on the Cornflakes port\r\n";
        sendCopy(rx, err, sizeof err - 1);
        return;
    }
    if (!commandAllowed(argv[0])) {
        cf.malformed++;
        sds err = sdscatprintf(sdsempty(), "-ERR command '%.64s' is not served on the Cornflakes port\r\n",
                               (char *)argv[0]->ptr);
        for (int i = 0; i < argc; i++) decrRefCount(argv[i]);
        sendCopy(rx, err, sdslen(err));
        sdsfree(err);
        return;
    }
    sds reply = runCommand(argv, argc);
    sendCopy(rx, reply, sdslen(reply));
    sdsfree(reply);
}

/* ---------------------------------------------------------------- Cornflakes format */

static int statusOfReply(sds reply) {
    if (sdslen(reply) == 0 || reply[0] != '-') return ST_OK;
    if (strstr(reply, "too large") || strstr(reply, "exceeds")) return ST_TOO_LARGE;
    return ST_BAD_REQUEST;
}

/* Sets field `f` of `m` to a string object's bytes: a pinned value is referenced (pointer
 * recovery finds its buffer), anything else is copied into the arena. */
static int setValue(cf_msg m, uint32_t f, robj *o, int append) {
    char buf[LONG_STR_SIZE];
    const char *p;
    size_t n;
    if (sdsEncodedObject(o)) {
        p = o->ptr;
        n = sdslen(o->ptr);
        if (cfSdsIsPinned(o->ptr)) cf.zero_copy_sends++;
        else cf.copied_sends++;
    } else {
        cf.copied_sends++;
        n = ll2string(buf, sizeof buf, (long)o->ptr);
        p = buf;
    }
    return append ? cf_msg_append_bytes(m, f, (const uint8_t *)p, n)
                  : cf_msg_set_bytes(m, f, (const uint8_t *)p, n);
}

static robj *keyObject(cf_msg req, uint32_t f, size_t i, int repeated) {
    const uint8_t *p;
    size_t n;
    cf_status st = repeated ? cf_msg_get_bytes_at(req, f, i, &p, &n) : cf_msg_get_bytes(req, f, &p, &n);
    if (st != CF_OK) return NULL;
    return createStringObject((const char *)p, n);
}

static __attribute__((noinline)) void serveObject(const cf_rx *rx) {
    int op = rx->msg_type;
    if (op <= 0 || op >= OP_MAX || cf.ops[op].resp == UINT32_MAX) {
        cf.malformed++;
        return; /* an unknown type has no reply message: dropped (counted) */
    }
    cfOp *o = &cf.ops[op];
    cf_msg req, resp;
    if (cf_msg_decode_buf(cf.arena, cf.kv, o->req, rx->data, &req) != CF_OK ||
        cf_msg_new(cf.arena, cf.kv, o->resp, &resp) != CF_OK) {
        cf.malformed++;
        return; /* undecodable: no id to answer with */
    }
    uint64_t id = 0;
    cf_msg_get_uint(req, cf.req_id_field, &id);
    cf_msg_set_uint(resp, o->resp_id, id);
    int status = ST_OK;
    robj *key = NULL;
    if (op != OP_GETM && !(key = keyObject(req, o->req_key, 0, 0))) status = ST_BAD_REQUEST;
    if (status == ST_OK) switch (op) {
    case OP_GET: {
        robj *v = lookupKeyRead(server.db, key);
        if (!v) status = ST_NOT_FOUND;
        else if (v->type != OBJ_STRING) status = ST_BAD_REQUEST;
        else if (setValue(resp, o->resp_val, v, 0) != CF_OK) status = ST_TOO_LARGE;
        break;
    }
    case OP_GETM: {
        size_t n = 0;
        cf_msg_count(req, o->req_keys, &n);
        if (n == 0 || n > CF_MAX_ARGS) { status = ST_BAD_REQUEST; break; }
        for (size_t i = 0; i < n; i++) {
            robj *k = keyObject(req, o->req_keys, i, 1);
            robj *v = k ? lookupKeyRead(server.db, k) : NULL;
            int s = !k ? ST_BAD_REQUEST : !v ? ST_NOT_FOUND : v->type != OBJ_STRING ? ST_BAD_REQUEST : ST_OK;
            if (s == ST_OK && setValue(resp, o->resp_vals, v, 1) != CF_OK) s = ST_TOO_LARGE;
            if (s != ST_OK) cf_msg_append_bytes(resp, o->resp_vals, NULL, 0);
            cf_msg_append_int(resp, o->resp_statuses, s);
            if (status == ST_OK) status = s;
            if (k) decrRefCount(k);
        }
        break;
    }
    case OP_GETLIST: {
        robj *v = lookupKeyRead(server.db, key);
        if (!v) { status = ST_NOT_FOUND; break; }
        if (v->type != OBJ_LIST) { status = ST_BAD_REQUEST; break; }
        listTypeIterator *li = listTypeInitIterator(v, 0, LIST_TAIL);
        listTypeEntry e;
        while (listTypeNext(li, &e)) {
            quicklistEntry *q = &e.entry;
            char buf[LONG_STR_SIZE];
            const uint8_t *p = q->value;
            size_t n = q->sz;
            if (!p) {
                n = ll2string(buf, sizeof buf, q->longval);
                p = (const uint8_t *)buf;
                cf.copied_sends++;
            } else if (q->node->pinned) {
                cf.zero_copy_sends++; /* referenced: pointer recovery finds its buffer */
            } else {
                cf.copied_sends++; /* in a listpack (or on the heap): copied into the reply */
            }
            if (cf_msg_append_bytes(resp, o->resp_vals, p, n) != CF_OK) status = ST_TOO_LARGE;
        }
        listTypeReleaseIterator(li);
        break;
    }
    default: { /* writes: run as commands, so Redis's own checks and replication apply */
        robj *argv[3];
        int argc = 2;
        robj *cur = op == OP_APPEND ? lookupKeyRead(server.db, key) : NULL;
        const char *name = op == OP_PUT ? "SET" : op == OP_DELETE ? "DEL"
                         : (cur && cur->type == OBJ_LIST) ? "RPUSH" : "APPEND";
        argv[0] = createStringObject(name, strlen(name));
        incrRefCount(key);
        argv[1] = key;
        if (op != OP_DELETE) {
            const uint8_t *p;
            size_t n;
            if (cf_msg_get_bytes(req, o->req_val, &p, &n) != CF_OK) {
                decrRefCount(argv[0]);
                decrRefCount(argv[1]);
                status = ST_BAD_REQUEST;
                break;
            }
            argv[2] = createStringObject((const char *)p, n);
            argc = 3;
        }
        sds reply = runCommand(argv, argc);
        status = statusOfReply(reply);
        if (op == OP_DELETE && status == ST_OK && !strcmp(reply, ":0\r\n")) status = ST_NOT_FOUND;
        sdsfree(reply);
    }
    }
    if (key) decrRefCount(key);
    cf_msg_set_int(resp, o->resp_status, status);
    cf_status st =
        cf_dp_send_msg(cf.dp, rx->conn, rx->incarnation, rx->msg_id, rx->msg_type, resp);
    if (st == CF_ERR_AGAIN) {
        cf_dp_flush(cf.dp);
        st = cf_dp_send_msg(cf.dp, rx->conn, rx->incarnation, rx->msg_id, rx->msg_type, resp);
    }
    if (st == CF_OK) cf.replies++;
    else cf.send_errors++;
}

/* ---------------------------------------------------------------- event loop */

static void cfReadable(aeEventLoop *el, int fd, void *data, int mask) {
    UNUSED(el); UNUSED(fd); UNUSED(data); UNUSED(mask);
    drainOrphans();
    cf_rx rx[CF_BURST];
    size_t n;
    for (int rounds = 0; rounds < 8; rounds++) {
        if (cf_dp_recv(cf.dp, rx, CF_BURST, &n) != CF_OK || n == 0) break;
        for (size_t i = 0; i < n; i++) {
            cf.requests++;
            if (cf.resp_format) {
                const uint8_t *p;
                size_t len;
                if (cf_buf_data(rx[i].data, &p, &len) == CF_OK) serveResp(&rx[i], p, len);
            } else {
                serveObject(&rx[i]);
            }
            cf_buf_release(rx[i].data);
        }
        cf_dp_flush(cf.dp);
        cf_arena_reset(cf.arena);
    }
}

/* Every 100 ms: release pinned strings that background threads freed (FLUSHALL ASYNC, lazy
 * free), also when no Cornflakes traffic arrives. */
static int cfCron(aeEventLoop *el, long long id, void *data) {
    UNUSED(el); UNUSED(id); UNUSED(data);
    drainOrphans();
    return 100;
}

static uint32_t field(uint32_t type, const char *name) {
    uint32_t f;
    if (cf_schema_field(cf.kv, type, name, &f) != CF_OK) return UINT32_MAX;
    return f;
}

static void setupOp(int op, const char *req, const char *resp) {
    cfOp *o = &cf.ops[op];
    if (cf_schema_message(cf.kv, req, &o->req) != CF_OK || cf_schema_message(cf.kv, resp, &o->resp) != CF_OK) {
        cfLog("schema");
        exit(1);
    }
    o->req_key = field(o->req, "key");
    o->req_keys = field(o->req, "keys");
    o->req_val = field(o->req, "val");
    o->resp_id = field(o->resp, "id");
    o->resp_val = field(o->resp, "val");
    o->resp_vals = field(o->resp, "vals");
    o->resp_status = field(o->resp, "status");
    o->resp_statuses = field(o->resp, "statuses");
}

/* Polls a datapath without a file descriptor (AF_XDP, ConnectX, DPDK): a time event due again at
 * once, so the event loop never sleeps while the port is on (a kernel-bypass core spins). */
static int cfPoll(aeEventLoop *el, long long id, void *data) {
    UNUSED(id); UNUSED(data);
    cfReadable(el, -1, NULL, 0);
    return 0;
}

/* Opens what cornflakes-datapath names: "socket" (kernel UDP, the default), "xdp IFNAME
 * [IP=MAC]", "mlx5 DEVICE", "ice DPDK-ARGS" or "emu DIR" (the mlx5 driver against the
 * emulated ConnectX, driven by the plan a bench writes into DIR: docs/c-api.md). The kernel-bypass ones need the C library built
 * with that feature (scripts/redis-cornflakes.sh with CORNFLAKES_C_FEATURES) and a fixed port. */
static int openDatapath(void) {
    const char *spec = server.cornflakes_datapath ? server.cornflakes_datapath : "";
    spec += strspn(spec, " ");
    size_t k = strcspn(spec, " ");
    const char *arg = spec + k + strspn(spec + k, " ");
    int port = server.cornflakes_port;
    if (k == 0 || (k == 6 && !strncmp(spec, "socket", 6)))
        return cf_dp_socket_new_sized(server.cornflakes_bind, (uint16_t)(port < 0 ? 0 : port),
                                      CF_MAX_MESSAGE, &cf.dp) == CF_OK;
    if (k == 3 && !strncmp(spec, "emu", 3)) /* the emulated ConnectX; its clients use no port */
        return cf_dp_emu_new(arg, &cf.dp) == CF_OK;
    if (port <= 0) {
        serverLog(LL_WARNING, "cornflakes-datapath '%s' needs a cornflakes-port of its own (not -1)", spec);
        return 0;
    }
    cf_status st;
    if (k == 3 && !strncmp(spec, "xdp", 3)) {
        char ifname[64] = "", peer[64] = "";
        if (sscanf(arg, "%63s %63s", ifname, peer) < 1) {
            serverLog(LL_WARNING, "cornflakes-datapath: xdp IFNAME [IP=MAC]");
            return 0;
        }
        st = cf_dp_xdp_new(ifname, server.cornflakes_bind, (uint16_t)port, peer[0] ? peer : NULL, 0, &cf.dp);
    } else if (k == 4 && !strncmp(spec, "mlx5", 4)) {
        st = cf_dp_mlx5_new(arg, server.cornflakes_bind, (uint16_t)port, CF_MAX_MESSAGE, 0, &cf.dp);
    } else if (k == 3 && !strncmp(spec, "ice", 3)) {
        st = cf_dp_ice_new(arg, server.cornflakes_bind, (uint16_t)port, &cf.dp);
    } else {
        serverLog(LL_WARNING, "cornflakes-datapath must be socket, xdp IFNAME [IP=MAC], mlx5 DEVICE, ice DPDK-ARGS or emu DIR, not '%s'", spec);
        return 0;
    }
    return st == CF_OK;
}

/* Called at the end of initServer: opens the datapath when cornflakes-port is set. */
void cfInit(void) {
    cf.main_thread = pthread_self();
    if (server.cornflakes_port == 0) return;
    if (!strcasecmp(server.cornflakes_format, "resp")) cf.resp_format = 1;
    else if (strcasecmp(server.cornflakes_format, "cornflakes")) {
        serverLog(LL_WARNING, "cornflakes-format must be resp or cornflakes, not '%s'", server.cornflakes_format);
        exit(1);
    }
    if (!server.cornflakes_schema) {
        serverLog(LL_WARNING, "cornflakes-port needs cornflakes-schema (the repository's schemas/kv.proto)");
        exit(1);
    }
    if (cf_schema_load(server.cornflakes_schema, NULL, &cf.kv) != CF_OK || !openDatapath() ||
        cf_dp_memory(cf.dp, &cf.mem) != CF_OK || cf_mem_max_len(cf.mem, &cf.max_pinned) != CF_OK ||
        cf_arena_new(cf.mem, &cf.arena) != CF_OK ||
        cf_arena_set_threshold(cf.arena, (size_t)server.cornflakes_threshold) != CF_OK) {
        cfLog("setup");
        exit(1);
    }
    for (int i = 0; i < OP_MAX; i++) cf.ops[i].resp = UINT32_MAX;
    setupOp(OP_GET, "kv.GetReq", "kv.GetResp");
    setupOp(OP_PUT, "kv.PutReq", "kv.PutResp");
    setupOp(OP_GETM, "kv.GetMReq", "kv.GetMResp");
    setupOp(OP_GETLIST, "kv.GetListReq", "kv.GetListResp");
    setupOp(OP_APPEND, "kv.AppendReq", "kv.AppendResp");
    setupOp(OP_DELETE, "kv.DeleteReq", "kv.DeleteResp");
    cf.req_id_field = field(cf.ops[OP_GET].req, "id");
    cf.pinned = dictCreate(&pinnedDictType);
    pthread_mutex_init(&cf.orphan_lock, NULL);
    cf.fake = createClient(NULL);
    cf.fake->flags |= CLIENT_MODULE; /* replies are collected, not written to a socket */
    cf.fake->user = NULL;            /* the root user, as module calls */
    cf.fake->authenticated = 1;
    int fd;
    uint16_t port = 0;
    const char *kind = "socket";
    cf_dp_kind(cf.dp, &kind);
    cf.kind = kind;
    cf_dp_local_port(cf.dp, &port);
    if (cf_dp_fd(cf.dp, &fd) == CF_OK) {
        if (aeCreateFileEvent(server.el, fd, AE_READABLE, cfReadable, NULL) == AE_ERR) {
            serverLog(LL_WARNING, "cornflakes: cannot watch the datapath's socket");
            exit(1);
        }
    } else if (aeCreateTimeEvent(server.el, 0, cfPoll, NULL, NULL) == AE_ERR) {
        serverLog(LL_WARNING, "cornflakes: cannot poll the datapath");
        exit(1);
    }
    if (aeCreateTimeEvent(server.el, 100, cfCron, NULL, NULL) == AE_ERR) {
        serverLog(LL_WARNING, "cornflakes: cannot create the timer");
        exit(1);
    }
    sdsFreeHook = cfSdsFreeHook;
    /* List elements at least the threshold long: each in a plain node, pinned (see above). */
    quicklistisSetPackedThreshold((size_t)server.cornflakes_threshold);
    quicklistPinnedAlloc = cfListElementAlloc;
    quicklistPinnedFree = cfListElementFree;
    cf.on = 1;
    serverLog(LL_NOTICE, "Cornflakes: serving %s on UDP %s:%d, %s datapath (values >= %lld bytes pinned, sent by reference)",
              cf.resp_format ? "RESP" : "Cornflakes objects", server.cornflakes_bind,
              (int)port, kind, server.cornflakes_threshold);
}

/* The INFO "cornflakes" section. */
sds cfInfo(sds info) {
    cf_dp_counters c = {0};
    if (cf.on) cf_dp_get_counters(cf.dp, &c);
    return sdscatprintf(info,
        "# Cornflakes\r\n"
        "cornflakes_enabled:%d\r\ncornflakes_format:%s\r\ncornflakes_datapath:%s\r\n"
        "cornflakes_requests:%lld\r\ncornflakes_replies:%lld\r\ncornflakes_malformed:%lld\r\n"
        "cornflakes_send_errors:%lld\r\ncornflakes_dropped_datagrams:%llu\r\n"
        "cornflakes_pinned_values:%lld\r\ncornflakes_pinned_bytes:%lld\r\n"
        "cornflakes_pinned_list_elements:%lld\r\ncornflakes_pinned_list_element_bytes:%lld\r\n"
        "cornflakes_pinned_failures:%lld\r\ncornflakes_zero_copy_values_sent:%lld\r\n"
        "cornflakes_copied_values_sent:%lld\r\n",
        cf.on, cf.on ? (cf.resp_format ? "resp" : "cornflakes") : "off", cf.on ? cf.kind : "off",
        cf.requests, cf.replies, cf.malformed, cf.send_errors, (unsigned long long)c.total_drops,
        cf.pinned_values, cf.pinned_bytes, cf.pinned_elements, cf.pinned_element_bytes,
        cf.pinned_failures, cf.zero_copy_sends, cf.copied_sends);
}
