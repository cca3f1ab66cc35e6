/* porin C agent: compile a policy with porin, load porin's eBPF object with
 * libbpf, fill its maps through the atomic A/B replacement of DATAPATH.md
 * §2.3, decide packets with BPF_PROG_TEST_RUN and compare each verdict with
 * porin's reference evaluator; then change the policy and apply the change
 * to the live policy map as a hole-free difference.
 *
 *   agent INVENTORY POLICY_V1 POLICY_V2 FLOWS
 *
 * FLOWS: one flow per line, `SRC_IP DST_IP PROTO PORT` (PROTO tcp, udp or
 * icmp; PORT the destination port or ICMP type), IPv4. Output: one line
 * `verdict v1|v2 SRC DST PROTO PORT kernel=K reference=R` per flow.
 * Exit 0 when every kernel verdict equals the reference verdict.
 * Needs root (BPF_PROG_LOAD). Build: see Makefile. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/bpf.h>

#include "porin.h"

#define MAX_FLOWS 256

struct flow {
    char src[64], dst[64], proto_name[8];
    uint8_t proto;
    uint16_t port;
};

struct datapath {
    struct bpf_object *object;
    int from_endpoint, to_endpoint; /* program fds */
    int policy[2], config, ipcache4;
    uint32_t active; /* slot the programs read (porin_config) */
};

static const char *verdict_name(porin_verdict v) {
    return v == PORIN_VERDICT_ALLOW ? "allow" : v == PORIN_VERDICT_REDIRECT ? "redirect" : "deny";
}

static int fail(const char *what, porin_result r) {
    char message[PORIN_RESULT_MESSAGE_MAX];
    size_t n;
    if (porin_result_message((uint32_t)r, message, sizeof message, &n) != PORIN_RESULT_OK)
        snprintf(message, sizeof message, "code %u", (unsigned)r);
    fprintf(stderr, "agent: %s: %s\n", what, message);
    return 1;
}

static char *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    char *data;
    long size;
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    size = ftell(f);
    fseek(f, 0, SEEK_SET);
    data = malloc((size_t)size + 1);
    if (data && fread(data, 1, (size_t)size, f) != (size_t)size) {
        free(data);
        data = NULL;
    }
    fclose(f);
    *len = (size_t)size;
    return data;
}

static int compile(porin_session *session, const char *policy_path, porin_compilation **out) {
    porin_diagnostics *diagnostics = NULL;
    porin_str text;
    porin_result r;
    if ((r = porin_session_clear_policies(session)) != PORIN_RESULT_OK)
        return fail("clear policies", r);
    if ((r = porin_session_add_policy_path(session, policy_path, strlen(policy_path))) !=
        PORIN_RESULT_OK)
        return fail(policy_path, r);
    r = porin_session_compile(session, out, &diagnostics);
    if (porin_diagnostics_count(diagnostics) > 0 &&
        porin_diagnostics_render(diagnostics, &text) == PORIN_RESULT_OK)
        fprintf(stderr, "%.*s", (int)text.len, text.ptr);
    porin_diagnostics_free(diagnostics);
    return r == PORIN_RESULT_OK ? 0 : fail("compile", r);
}

/* ---- packets: Ethernet + IPv4 + TCP/UDP/ICMP ---- */

static uint16_t checksum(const uint8_t *data, size_t len) {
    uint32_t sum = 0;
    size_t i;
    for (i = 0; i + 1 < len; i += 2) sum += (uint32_t)(data[i] << 8 | data[i + 1]);
    if (len & 1) sum += (uint32_t)(data[len - 1] << 8);
    while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
    return (uint16_t)~sum;
}

static size_t build_packet(const struct flow *flow, uint16_t sport, uint8_t *p) {
    size_t l4 = flow->proto == IPPROTO_TCP ? 20 : 8, len = 14 + 20 + l4;
    uint8_t *ip = p + 14, *t = p + 34;
    uint16_t c;
    memset(p, 0, len);
    memcpy(p, "\x02\x00\x00\x00\x00\x02\x02\x00\x00\x00\x00\x01", 12);
    p[12] = 0x08; /* IPv4 */
    ip[0] = 0x45;
    ip[2] = (uint8_t)((20 + l4) >> 8);
    ip[3] = (uint8_t)(20 + l4);
    ip[8] = 64;
    ip[9] = flow->proto;
    inet_pton(AF_INET, flow->src, ip + 12);
    inet_pton(AF_INET, flow->dst, ip + 16);
    c = checksum(ip, 20);
    ip[10] = (uint8_t)(c >> 8);
    ip[11] = (uint8_t)c;
    if (flow->proto == IPPROTO_ICMP) {
        t[0] = (uint8_t)flow->port; /* type */
        t[4] = (uint8_t)(sport >> 8); /* echo identifier */
        t[5] = (uint8_t)sport;
        t[7] = 1;
        c = checksum(t, 8);
        t[2] = (uint8_t)(c >> 8);
        t[3] = (uint8_t)c;
    } else {
        t[0] = (uint8_t)(sport >> 8);
        t[1] = (uint8_t)sport;
        t[2] = (uint8_t)(flow->port >> 8);
        t[3] = (uint8_t)flow->port;
        if (flow->proto == IPPROTO_TCP) {
            t[12] = 5 << 4;
            t[13] = 0x02; /* SYN */
        } else {
            t[5] = 8;
        }
    }
    return len;
}

/* ---- maps ---- */

static int clear_map(int fd, size_t key_size) {
    uint8_t key[64], next[64];
    while (bpf_map_get_next_key(fd, NULL, next) == 0) {
        memcpy(key, next, key_size);
        if (bpf_map_delete_elem(fd, key)) return -errno;
    }
    return 0;
}

static int fill(int fd, const porin_map_entries *e) {
    size_t i;
    for (i = 0; i < e->count; i++)
        if (bpf_map_update_elem(fd, e->keys + i * e->key_size, e->values + i * e->value_size,
                                BPF_ANY))
            return -errno;
    return 0;
}

/* DATAPATH.md §2.3: fill the inactive map, then flip porin_config. */
static int replace_policy(struct datapath *dp, const porin_compilation *c, const char *endpoint) {
    porin_map_entries entries;
    uint32_t next = dp->active ^ 1, zero = 0;
    uint8_t config[8] = {0};
    porin_result r = porin_compilation_policy_entries(c, endpoint, strlen(endpoint), &entries);
    if (r != PORIN_RESULT_OK) return fail(endpoint, r);
    if (clear_map(dp->policy[next], PORIN_POLICY_KEY_SIZE) || fill(dp->policy[next], &entries)) {
        perror("agent: policy map");
        return 1;
    }
    config[0] = (uint8_t)next;
    if (bpf_map_update_elem(dp->config, &zero, config, BPF_ANY)) {
        perror("agent: porin_config");
        return 1;
    }
    dp->active = next;
    return 0;
}

static int load_ipcache(struct datapath *dp, const porin_compilation *c) {
    porin_map_entries entries;
    porin_result r = porin_compilation_ipcache_entries(c, 4, &entries);
    if (r != PORIN_RESULT_OK) return fail("ipcache", r);
    if (fill(dp->ipcache4, &entries)) {
        perror("agent: ipcache");
        return 1;
    }
    return 0;
}

static int open_datapath(struct datapath *dp, const porin_compilation *c) {
    const uint8_t *object;
    size_t len;
    struct bpf_program *from, *to;
    porin_result r = porin_compilation_object(c, &object, &len);
    if (r != PORIN_RESULT_OK) return fail("object", r);
    memset(dp, 0, sizeof *dp);
    dp->object = bpf_object__open_mem(object, len, NULL);
    if (!dp->object || bpf_object__load(dp->object)) {
        fprintf(stderr, "agent: loading the porin object failed (root needed): %s\n",
                strerror(errno));
        return 1;
    }
    from = bpf_object__find_program_by_name(dp->object, "porin_from_endpoint");
    to = bpf_object__find_program_by_name(dp->object, "porin_to_endpoint");
    dp->from_endpoint = from ? bpf_program__fd(from) : -1;
    dp->to_endpoint = to ? bpf_program__fd(to) : -1;
    dp->policy[0] = bpf_object__find_map_fd_by_name(dp->object, "porin_policy_a");
    dp->policy[1] = bpf_object__find_map_fd_by_name(dp->object, "porin_policy_b");
    dp->config = bpf_object__find_map_fd_by_name(dp->object, "porin_config");
    dp->ipcache4 = bpf_object__find_map_fd_by_name(dp->object, "porin_ipcache4");
    if (dp->from_endpoint < 0 || dp->to_endpoint < 0 || dp->policy[0] < 0 || dp->policy[1] < 0 ||
        dp->config < 0 || dp->ipcache4 < 0) {
        fprintf(stderr, "agent: object lacks a program or map of DATAPATH.md\n");
        return 1;
    }
    return 0;
}

/* Runs one program on a flow's first packet: 0 drop, 1 pass, 2 redirect. */
static int run(int prog_fd, const struct flow *flow, uint16_t sport) {
    uint8_t packet[128], out[128];
    struct __sk_buff ctx;
    size_t len = build_packet(flow, sport, packet);
    LIBBPF_OPTS(bpf_test_run_opts, opts, .data_in = packet, .data_size_in = (uint32_t)len,
                .data_out = out, .data_size_out = sizeof out, .ctx_in = &ctx,
                .ctx_size_in = sizeof ctx, .ctx_out = &ctx, .ctx_size_out = sizeof ctx,
                .repeat = 1);
    memset(&ctx, 0, sizeof ctx);
    if (bpf_prog_test_run_opts(prog_fd, &opts)) {
        perror("agent: BPF_PROG_TEST_RUN");
        return -1;
    }
    if (opts.retval != 0) return 0;
    return (ctx.mark & 0xffff) == 0x0200 ? 2 : 1;
}

/* The kernel verdict of a flow: egress at the source endpoint, ingress at
 * the destination endpoint, each with that endpoint's policy swapped in. */
static int kernel_verdict(struct datapath *dp, const porin_compilation *c, const struct flow *flow,
                          uint16_t sport, porin_verdict *out) {
    porin_str name;
    char endpoint[256];
    int result, redirect = 0;
    int sides[2] = {0, 1};
    size_t i;
    for (i = 0; i < 2; i++) {
        const char *addr = sides[i] == 0 ? flow->src : flow->dst;
        if (porin_compilation_endpoint_by_address(c, addr, strlen(addr), &name) != PORIN_RESULT_OK)
            continue; /* not an endpoint: nothing enforces on that side */
        snprintf(endpoint, sizeof endpoint, "%.*s", (int)name.len, name.ptr);
        if (replace_policy(dp, c, endpoint)) return 1;
        result = run(sides[i] == 0 ? dp->from_endpoint : dp->to_endpoint, flow, sport);
        if (result < 0) return 1;
        if (result == 0) {
            *out = PORIN_VERDICT_DENY;
            return 0;
        }
        redirect |= result == 2;
    }
    *out = redirect ? PORIN_VERDICT_REDIRECT : PORIN_VERDICT_ALLOW;
    return 0;
}

static int reference_verdict(const porin_compilation *c, const struct flow *f, porin_verdict *out) {
    porin_decision *decision = NULL;
    porin_result r = porin_compilation_decide(c, f->src, strlen(f->src), f->dst, strlen(f->dst),
                                              f->proto, f->port, &decision);
    if (r != PORIN_RESULT_OK) return fail("decide", r);
    *out = porin_decision_verdict(decision);
    porin_decision_free(decision);
    return 0;
}

static int decide_all(struct datapath *dp, const porin_compilation *c, const char *label,
                      const struct flow *flows, size_t n, uint16_t *sport, int *mismatches) {
    size_t i;
    for (i = 0; i < n; i++) {
        porin_verdict kernel = PORIN_VERDICT_DENY, reference = PORIN_VERDICT_DENY;
        if (kernel_verdict(dp, c, &flows[i], (*sport)++, &kernel) ||
            reference_verdict(c, &flows[i], &reference))
            return 1;
        printf("verdict %s %s %s %s %u kernel=%s reference=%s\n", label, flows[i].src,
               flows[i].dst, flows[i].proto_name, (unsigned)flows[i].port, verdict_name(kernel),
               verdict_name(reference));
        if (kernel != reference) (*mismatches)++;
    }
    return 0;
}

static size_t read_flows(const char *path, struct flow *flows) {
    FILE *f = fopen(path, "r");
    char line[256];
    size_t n = 0;
    unsigned port;
    if (!f) return 0;
    while (n < MAX_FLOWS && fgets(line, sizeof line, f)) {
        struct flow *flow = &flows[n];
        if (line[0] == '#' || sscanf(line, "%63s %63s %7s %u", flow->src, flow->dst,
                                     flow->proto_name, &port) != 4)
            continue;
        flow->port = (uint16_t)port;
        flow->proto = strcmp(flow->proto_name, "tcp") == 0   ? IPPROTO_TCP
                      : strcmp(flow->proto_name, "udp") == 0 ? IPPROTO_UDP
                                                             : IPPROTO_ICMP;
        n++;
    }
    fclose(f);
    return n;
}

/* Applies the v1 -> v2 difference of one endpoint to the ACTIVE policy map
 * write by write (no A/B flip), then checks the map holds exactly v2. */
static int apply_diff(struct datapath *dp, const porin_compilation *v1, const porin_compilation *v2,
                      const char *endpoint) {
    porin_diff *diff = NULL;
    porin_change change;
    porin_map_entries want;
    size_t i, count = 0;
    uint8_t key[PORIN_POLICY_KEY_SIZE], next[PORIN_POLICY_KEY_SIZE], value[PORIN_POLICY_VALUE_SIZE];
    int fd, first = 1;
    porin_result r;
    if (replace_policy(dp, v1, endpoint)) return 1;
    fd = dp->policy[dp->active];
    r = porin_compilation_policy_diff(v1, v2, endpoint, strlen(endpoint), &diff);
    if (r != PORIN_RESULT_OK) return fail("diff", r);
    for (i = 0; i < porin_diff_count(diff); i++) {
        if (porin_diff_get(diff, i, &change) != PORIN_RESULT_OK) break;
        if (change.kind == PORIN_CHANGE_KIND_DELETE ? bpf_map_delete_elem(fd, change.key)
                                                    : bpf_map_update_elem(fd, change.key,
                                                                          change.value, BPF_ANY)) {
            perror("agent: applying the difference");
            porin_diff_free(diff);
            return 1;
        }
    }
    printf("diff %s: %zu writes applied to the live map\n", endpoint, porin_diff_count(diff));
    porin_diff_free(diff);
    if ((r = porin_compilation_policy_entries(v2, endpoint, strlen(endpoint), &want)) !=
        PORIN_RESULT_OK)
        return fail("entries", r);
    while (bpf_map_get_next_key(fd, first ? NULL : key, next) == 0) {
        first = 0;
        memcpy(key, next, sizeof key);
        count++;
        if (bpf_map_lookup_elem(fd, key, value)) return 1;
        for (i = 0; i < want.count; i++)
            if (!memcmp(want.keys + i * 12, key, 12) && !memcmp(want.values + i * 12, value, 12))
                break;
        if (i == want.count) {
            fprintf(stderr, "agent: live map has an entry v2 does not\n");
            return 1;
        }
    }
    if (count != want.count) {
        fprintf(stderr, "agent: live map has %zu entries, v2 has %zu\n", count, want.count);
        return 1;
    }
    return 0;
}

int main(int argc, char **argv) {
    porin_session *session = NULL;
    porin_compilation *v1 = NULL, *v2 = NULL;
    struct datapath dp = {0};
    static struct flow flows[MAX_FLOWS];
    size_t n, i, inventory_len;
    char *inventory;
    uint16_t sport = 20000;
    int mismatches = 0, status = 1;
    porin_result r;

    if (argc != 5) {
        fprintf(stderr, "usage: %s INVENTORY POLICY_V1 POLICY_V2 FLOWS\n", argv[0]);
        return 2;
    }
    printf("porin %s (header %s)\n", porin_version(), PORIN_VERSION);
    n = read_flows(argv[4], flows);
    inventory = read_file(argv[1], &inventory_len);
    if (!inventory || n == 0) {
        fprintf(stderr, "agent: cannot read %s or no flows in %s\n", argv[1], argv[4]);
        return 2;
    }
    if ((r = porin_session_new(&session)) != PORIN_RESULT_OK) return fail("session", r);
    r = porin_session_add_inventory_bytes(session, argv[1], strlen(argv[1]),
                                          (const uint8_t *)inventory, inventory_len);
    free(inventory);
    if (r != PORIN_RESULT_OK) {
        fail("inventory", r);
        goto out;
    }
    if (compile(session, argv[2], &v1) || open_datapath(&dp, v1) || load_ipcache(&dp, v1)) goto out;
    if (decide_all(&dp, v1, "v1", flows, n, &sport, &mismatches)) goto out;

    /* The policy changes: recompile, then update each endpoint's live map
     * with the hole-free difference instead of an A/B swap. */
    if (compile(session, argv[3], &v2)) goto out;
    for (i = 0; i < porin_compilation_endpoint_count(v2); i++) {
        porin_str name;
        char endpoint[256];
        if (porin_compilation_endpoint_name(v2, i, &name) != PORIN_RESULT_OK) goto out;
        snprintf(endpoint, sizeof endpoint, "%.*s", (int)name.len, name.ptr);
        if (apply_diff(&dp, v1, v2, endpoint)) goto out;
    }
    if (decide_all(&dp, v2, "v2", flows, n, &sport, &mismatches)) goto out;
    printf("%d mismatch(es)\n", mismatches);
    status = mismatches ? 1 : 0;
out:
    if (dp.object) bpf_object__close(dp.object);
    porin_compilation_free(v1);
    porin_compilation_free(v2);
    porin_session_free(session);
    return status;
}
