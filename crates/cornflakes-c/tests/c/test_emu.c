/*
 * The emulated ConnectX from C (cf_dp_emu_new): this program serves on the real mlx5 driver
 * while the emulated device, on the second CPU, injects 10 000 prepared requests at a fixed
 * open-loop load and checks every reply. Twice:
 *   1. an honest echo server (by reference: cf_dp_send_bufs), which must be answered in full:
 *      every request verified, nothing lost or mismatched, payload coverage complete;
 *   2. a server that lies (one byte of every 50th reply changed, sent by copy), which the
 *      device's checks must catch (every payload checked: check_every 1).
 * Usage: test_emu   (needs two CPUs; run.sh skips it with fewer)
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cornflakes.h"
#include "check.h"

#define DISTINCT 64

/* Writes plan.bin (DISTINCT payloads of 64..4096 bytes) and plan.json (echo checks, one fixed
 * run of `requests` at `rate` req/s). */
static void write_plan(const char *dir, unsigned requests, unsigned rate, unsigned check_every) {
    char path[512];
    snprintf(path, sizeof path, "%s/plan.bin", dir);
    FILE *bin = fopen(path, "wb");
    CHECK(bin != NULL);
    snprintf(path, sizeof path, "%s/.plan.json.tmp", dir);
    FILE *js = fopen(path, "w");
    CHECK(js != NULL);
    if (!bin || !js) exit(1);
    /* A functional test, not a measurement: a reply counts unless it is a second late. */
    fprintf(js, "{\"mode\": \"c-echo\", \"shape\": \"echo\", \"check_every\": %u,\n"
                " \"timeout_ms\": 1000,\n"
                " \"fixed\": {\"rate_rps\": %u, \"requests\": %u},\n \"requests\": [\n",
            check_every, rate, requests);
    size_t off = 0;
    for (int i = 0; i < DISTINCT; i++) {
        size_t len = 64 + (size_t)i * 63;
        for (size_t j = 0; j < len; j++) fputc((int)((i * 7 + j) & 0xff), bin);
        fprintf(js, "  {\"type\": 3, \"payload\": [%zu, %zu], \"expect\": {\"echo\": true}}%s\n",
                off, len, i + 1 < DISTINCT ? "," : "");
        off += len;
    }
    fprintf(js, " ]}\n");
    fclose(bin);
    fclose(js);
    char final[512];
    snprintf(final, sizeof final, "%s/plan.json", dir);
    CHECK(rename(path, final) == 0); /* the device starts when plan.json appears, whole */
}

static int exists(const char *dir, const char *name) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return access(path, F_OK) == 0;
}

static char *slurp(const char *dir, const char *name) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "r");
    if (!f) return NULL;
    static char buf[1 << 20];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    return strdup(buf);
}

/* The first integer after `"key": ` in `json` (-1 when absent). */
static long long field(const char *json, const char *key) {
    char pat[128];
    snprintf(pat, sizeof pat, "\"%s\": ", key);
    const char *p = json ? strstr(json, pat) : NULL;
    return p ? atoll(p + strlen(pat)) : -1;
}

/* Serves until the plan is done: echoes each request (lying on every 50th when `lie`). */
static void serve(cf_dp dp, const char *dir, int lie) {
    cf_rx rx[32];
    uint8_t scratch[8192];
    unsigned long long served = 0;
    while (!exists(dir, "done")) {
        size_t n = 0;
        if (cf_dp_recv(dp, rx, 32, &n) != CF_OK) {
            CHECK(!"cf_dp_recv failed");
            break;
        }
        for (size_t i = 0; i < n; i++) {
            cf_rx r = rx[i];
            if (lie && r.msg_id % 50 == 0) {
                const uint8_t *d;
                size_t len;
                OK(cf_buf_data(r.data, &d, &len));
                memcpy(scratch, d, len);
                scratch[len / 2] ^= 0x5a;
                OK(cf_dp_send_copy(dp, r.conn, r.incarnation, r.msg_id, r.msg_type, scratch, len));
            } else {
                OK(cf_dp_send_bufs(dp, r.conn, r.incarnation, r.msg_id, r.msg_type, &r.data, 1));
            }
            OK(cf_buf_release(r.data));
            served++;
        }
        if (n > 0) OK(cf_dp_flush(dp));
    }
    printf("  served %llu requests\n", served);
}

static void run(int lie) {
    char dir[] = "/tmp/cf-emu-test-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);

    cf_dp dp = {0};
    OK(cf_dp_emu_new(dir, &dp));
    const char *kind = NULL;
    OK(cf_dp_kind(dp, &kind));
    CHECK(kind && strcmp(kind, "emu") == 0);
    write_plan(dir, 10000, 10000, lie ? 1 : 8);
    serve(dp, dir, lie);
    char *done = slurp(dir, "done");
    CHECK(done && strncmp(done, "ok", 2) == 0);
    if (done && strncmp(done, "ok", 2) != 0) fprintf(stderr, "plan failed: %s", done);
    char *report = slurp(dir, "report.json");
    CHECK(report != NULL);
    long long sent = field(report, "sent"), verified = field(report, "verified");
    long long mismatched = field(report, "mismatched"), lost = field(report, "lost");
    printf("  %s: sent %lld verified %lld mismatched %lld lost %lld\n", lie ? "liar" : "honest",
           sent, verified, mismatched, lost);
    /* 10 000 Poisson arrivals over 1 s: within 5 %. */
    CHECK(sent > 9500 && sent < 10500);
    if (!lie) {
        CHECK(verified == sent);
        CHECK(mismatched == 0 && lost == 0);
        CHECK(report && strstr(report, "\"coverage_complete\": true") != NULL);
        CHECK(field(report, "served_received") == sent);
    } else {
        /* Every 50th reply is wrong and every payload is checked: all of them caught. */
        CHECK(mismatched >= sent / 50 - 2 && mismatched <= sent / 50 + 2);
        CHECK(verified + mismatched + lost == sent);
    }
    OK(cf_dp_release(dp));
    free(done);
    free(report);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0);
}

int main(void) {
    run(0);
    run(1);
    printf("test_emu: %d checks, %d failures\n", checks, failures);
    return failures ? 1 : 0;
}
