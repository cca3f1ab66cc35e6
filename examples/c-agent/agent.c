/* porin C agent: compile a policy with porin, load porin's eBPF object with
 * libbpf, fill its maps through the atomic A/B replacement of DATAPATH.md
 * §2.3, decide packets with BPF_PROG_TEST_RUN and compare each verdict with
 * porin's reference evaluator; then change the policy and apply the change
 * to the live policy map as a hole-free difference.
 *
 * Each policy slot is two maps (DATAPATH.md §2.2): exact keys (prefix
 * length 64: identity, protocol and full port) go into its hash
 * (porin_polhash_a/_b), which the programs read first, every other key into
 * its LPM trie (porin_policy_a/_b); /32 ipcache entries go into
 * porin_ip4hash, shorter prefixes into porin_ipcache4. porin_config's
 * prefix_free bits stay 0 (the tries are always consulted: correct whatever
 * a later difference adds to them).
 *
 *   agent INVENTORY POLICY_V1 POLICY_V2 FLOWS
 *
 * FLOWS: one flow per line, `SRC_IP DST_IP PROTO PORT` (PROTO tcp, udp or
 * icmp; PORT the destination port or ICMP type), IPv4. Output: one line
 * `verdict v1|v2 SRC DST PROTO PORT kernel=K reference=R` per flow.
 * Exit 0 when every kernel verdict equals the reference verdict; 3 when
 * a difference failed part-way and was rolled back (v1 stays in force and
 * its verdicts were checked); 1 on a mismatch or any other error.
 * PORIN_AGENT_FAIL_AT_WRITE=K (tests only) makes write K of every
 * difference fail with EIO, to exercise the rollback.
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

/* One policy slot: its LPM trie and its exact-key hash. */
struct slot {
    int trie, hash;
};

struct datapath {
    struct bpf_object *object;
    int from_endpoint, to_endpoint; /* program fds */
    struct slot policy[2];
    int config, ipcache4, ipcache4_hosts;
    uint32_t active; /* slot the programs read (porin_config) */
};

/* The prefix length (the key's first u32, little-endian) of an exact key:
 * DATAPATH.md §2.2; of a host ipcache entry: §2.1. */
#define POLICY_EXACT_PREFIX 64
#define IPCACHE4_HOST_PREFIX 32

static uint32_t prefix_of(const uint8_t *key) {
    return (uint32_t)key[0] | (uint32_t)key[1] << 8 | (uint32_t)key[2] << 16 |
           (uint32_t)key[3] << 24;
}

/* The map of `slot` that holds `key`. */
static int slot_fd(const struct slot *slot, const uint8_t *key) {
    return prefix_of(key) == POLICY_EXACT_PREFIX ? slot->hash : slot->trie;
}

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

/* Writes every entry into `hosts` when its prefix length is `host_prefix`,
 * else into `prefixes`. */
static int fill(int prefixes, int hosts, uint32_t host_prefix, const porin_map_entries *e) {
    size_t i;
    for (i = 0; i < e->count; i++) {
        const uint8_t *key = e->keys + i * e->key_size;
        int fd = prefix_of(key) == host_prefix ? hosts : prefixes;
        if (bpf_map_update_elem(fd, key, e->values + i * e->value_size, BPF_ANY)) return -errno;
    }
    return 0;
}

/* DATAPATH.md §2.3: fill the inactive map, then flip porin_config. */
static int replace_policy(struct datapath *dp, const porin_compilation *c, const char *endpoint) {
    porin_map_entries entries;
    uint32_t next = dp->active ^ 1, zero = 0;
    uint8_t config[8] = {0};
    porin_result r = porin_compilation_policy_entries(c, endpoint, strlen(endpoint), &entries);
    if (r != PORIN_RESULT_OK) return fail(endpoint, r);
    if (clear_map(dp->policy[next].trie, PORIN_POLICY_KEY_SIZE) ||
        clear_map(dp->policy[next].hash, PORIN_POLICY_KEY_SIZE) ||
        fill(dp->policy[next].trie, dp->policy[next].hash, POLICY_EXACT_PREFIX, &entries)) {
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
    if (fill(dp->ipcache4, dp->ipcache4_hosts, IPCACHE4_HOST_PREFIX, &entries)) {
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
    dp->policy[0].trie = bpf_object__find_map_fd_by_name(dp->object, "porin_policy_a");
    dp->policy[1].trie = bpf_object__find_map_fd_by_name(dp->object, "porin_policy_b");
    dp->policy[0].hash = bpf_object__find_map_fd_by_name(dp->object, "porin_polhash_a");
    dp->policy[1].hash = bpf_object__find_map_fd_by_name(dp->object, "porin_polhash_b");
    dp->config = bpf_object__find_map_fd_by_name(dp->object, "porin_config");
    dp->ipcache4 = bpf_object__find_map_fd_by_name(dp->object, "porin_ipcache4");
    dp->ipcache4_hosts = bpf_object__find_map_fd_by_name(dp->object, "porin_ip4hash");
    if (dp->from_endpoint < 0 || dp->to_endpoint < 0 || dp->policy[0].trie < 0 ||
        dp->policy[1].trie < 0 || dp->policy[0].hash < 0 || dp->policy[1].hash < 0 ||
        dp->config < 0 || dp->ipcache4 < 0 || dp->ipcache4_hosts < 0) {
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

/* ---- applying a difference to the live map, with rollback ---- */

/* Test hook (set by crates/capi/tests/capi/c_agent.rs through the environment
 * variable PORIN_AGENT_FAIL_AT_WRITE=K): write K (0-based) of every
 * difference fails with EIO as if the kernel had refused it, before
 * reaching the kernel. Unset (the default): -1, never fires. */
static long fail_at_write = -1;

/* One policy-map entry (exact key, as BPF_MAP_GET_NEXT_KEY lists them). */
struct entry {
    uint8_t key[PORIN_POLICY_KEY_SIZE], value[PORIN_POLICY_VALUE_SIZE];
};

/* The exact contents of a policy map, kept in step with the writes. An LPM
 * trie cannot tell "absent" by lookup: looking up an absent key returns the
 * value of the longest shorter prefix covering it. So the undo log takes
 * previous values from this snapshot instead. */
struct shadow {
    struct entry *entries;
    size_t count, cap;
};

static struct entry *shadow_find(struct shadow *s, const uint8_t *key) {
    size_t i;
    for (i = 0; i < s->count; i++)
        if (!memcmp(s->entries[i].key, key, PORIN_POLICY_KEY_SIZE)) return &s->entries[i];
    return NULL;
}

/* Sets (value != NULL) or removes a key; -1 when out of memory. */
static int shadow_set(struct shadow *s, const uint8_t *key, const uint8_t *value) {
    struct entry *e = shadow_find(s, key);
    if (!value) {
        if (e) *e = s->entries[--s->count];
        return 0;
    }
    if (!e) {
        if (s->count == s->cap) {
            size_t cap = s->cap ? s->cap * 2 : 64;
            struct entry *grown = realloc(s->entries, cap * sizeof *grown);
            if (!grown) return -1;
            s->entries = grown;
            s->cap = cap;
        }
        e = &s->entries[s->count++];
        memcpy(e->key, key, PORIN_POLICY_KEY_SIZE);
    }
    memcpy(e->value, value, PORIN_POLICY_VALUE_SIZE);
    return 0;
}

/* Reads both maps of a slot (each key is in exactly one of them). */
static int shadow_read(const struct slot *slot, struct shadow *s) {
    uint8_t key[PORIN_POLICY_KEY_SIZE], next[PORIN_POLICY_KEY_SIZE], value[PORIN_POLICY_VALUE_SIZE];
    int fds[2] = {slot->trie, slot->hash}, i;
    for (i = 0; i < 2; i++) {
        int first = 1;
        while (bpf_map_get_next_key(fds[i], first ? NULL : key, next) == 0) {
            first = 0;
            memcpy(key, next, sizeof key);
            if (bpf_map_lookup_elem(fds[i], key, value) || shadow_set(s, key, value)) return -1;
        }
    }
    return 0;
}

/* 0 when the map holds exactly `want`'s entries; prints what differs. */
static int map_equals(const struct slot *slot, const porin_map_entries *want, const char *label) {
    struct shadow live = {0};
    size_t i;
    int status = 0;
    if (shadow_read(slot, &live)) {
        perror("agent: reading the live map");
        free(live.entries);
        return 1;
    }
    for (i = 0; i < want->count && !status; i++) {
        struct entry *e = shadow_find(&live, want->keys + i * want->key_size);
        if (!e || memcmp(e->value, want->values + i * want->value_size, want->value_size)) {
            fprintf(stderr, "agent: live map lacks or differs in entry %zu of %s\n", i, label);
            status = 1;
        }
    }
    if (!status && live.count != want->count) {
        fprintf(stderr, "agent: live map has %zu entries, %s has %zu\n", live.count, label,
                want->count);
        status = 1;
    }
    free(live.entries);
    return status;
}

/* One write of a difference (or of its undo); value NULL deletes. */
static int write_entry(const struct slot *slot, const uint8_t *key, const uint8_t *value) {
    int fd = slot_fd(slot, key);
    if (value) return bpf_map_update_elem(fd, key, value, BPF_ANY);
    if (bpf_map_delete_elem(fd, key) && errno != ENOENT) return -1;
    return 0;
}

/* Undoes writes count-1 .. 0 from the undo log, newest first. Why this
 * cannot run out of map space: each undo is the inverse of a write the
 * kernel accepted, applied to the map exactly as that write left it, so it
 * never needs more entries than the map held before that write (a deleted
 * key is re-inserted into a map one entry smaller than when it was there).
 * Returns the index of the write whose undo failed, or -1. */
static long roll_back(const struct slot *slot, const struct entry *undo, const int *present,
                      size_t count) {
    while (count-- > 0)
        if (write_entry(slot, undo[count].key, present[count] ? undo[count].value : NULL))
            return (long)count;
    return -1;
}

/* Applies a difference write by write to the live slot `slot` (each key
 * into the map of the slot that holds it). On a failed write, the writes
 * before it are undone in reverse order; returns 0 on
 * success, 2 after a rollback (the map holds its previous entries), 1 when
 * even the rollback failed (the map holds a mix: replace it whole). */
static int apply_changes(const struct slot *slot, const char *map_name, const char *endpoint,
                         const porin_diff *diff) {
    size_t i, n = porin_diff_count(diff);
    struct shadow shadow = {0};
    struct entry *undo = calloc(n ? n : 1, sizeof *undo);
    int *present = calloc(n ? n : 1, sizeof *present), status = 0;
    long undo_failed;
    porin_change change;
    if (!undo || !present || shadow_read(slot, &shadow)) {
        perror("agent: preparing the undo log");
        status = 1;
        goto out;
    }
    for (i = 0; i < n; i++) {
        struct entry *previous;
        int failed;
        if (porin_diff_get(diff, i, &change) != PORIN_RESULT_OK) {
            errno = EINVAL;
            failed = 1;
        } else if ((long)i == fail_at_write) {
            errno = EIO; /* injected by the test hook */
            failed = 1;
        } else {
            failed = write_entry(slot, change.key, change.value) != 0;
        }
        if (failed) {
            int error = errno;
            undo_failed = roll_back(slot, undo, present, i);
            fprintf(stderr,
                    "agent: write %zu of %zu of the difference for %s to the live map %s "
                    "failed: %s (errno %d); ",
                    i, n, endpoint, map_name, strerror(error), error);
            if (undo_failed >= 0) {
                fprintf(stderr,
                        "rolling back failed too at the undo of write %ld (%s): the map "
                        "holds a mix of both policies, replace it whole\n",
                        undo_failed, strerror(errno));
                status = 1;
            } else {
                fprintf(stderr,
                        "the %zu write(s) before it were rolled back, the map holds the "
                        "previous policy\n",
                        i);
                status = 2;
            }
            goto out;
        }
        memcpy(undo[i].key, change.key, PORIN_POLICY_KEY_SIZE);
        previous = shadow_find(&shadow, change.key);
        present[i] = previous != NULL;
        if (previous) memcpy(undo[i].value, previous->value, PORIN_POLICY_VALUE_SIZE);
        if (shadow_set(&shadow, change.key, change.value)) {
            perror("agent: undo log");
            status = 1;
            goto out;
        }
    }
out:
    free(shadow.entries);
    free(undo);
    free(present);
    return status;
}

/* After a rolled-back difference: every flow side `endpoint` enforces is
 * decided on the live map, then again after a fresh A/B install of v1;
 * both must agree (and the v1 install itself is checked against porin's
 * reference by decide_all). Returns the number of disagreements, -1 on
 * error. */
static int check_live_sides(struct datapath *dp, const porin_compilation *v1,
                            const char *endpoint, const struct flow *flows, size_t n,
                            uint16_t *sport) {
    int live[2 * MAX_FLOWS], fresh, mismatches = 0, checked = 0;
    size_t i, side;
    porin_str name;
    for (side = 0; side < 2; side++)
        for (i = 0; i < n; i++) {
            const char *addr = side == 0 ? flows[i].src : flows[i].dst;
            live[side * MAX_FLOWS + i] = -2;
            if (porin_compilation_endpoint_by_address(v1, addr, strlen(addr), &name) !=
                    PORIN_RESULT_OK ||
                name.len != strlen(endpoint) || memcmp(name.ptr, endpoint, name.len))
                continue;
            live[side * MAX_FLOWS + i] =
                run(side == 0 ? dp->from_endpoint : dp->to_endpoint, &flows[i], (*sport)++);
            if (live[side * MAX_FLOWS + i] < 0) return -1;
        }
    if (replace_policy(dp, v1, endpoint)) return -1;
    for (side = 0; side < 2; side++)
        for (i = 0; i < n; i++) {
            if (live[side * MAX_FLOWS + i] == -2) continue;
            fresh = run(side == 0 ? dp->from_endpoint : dp->to_endpoint, &flows[i], (*sport)++);
            if (fresh < 0) return -1;
            checked++;
            if (fresh != live[side * MAX_FLOWS + i]) {
                fprintf(stderr, "agent: %s %s -> %s: live map gives %d, v1 gives %d\n",
                        endpoint, flows[i].src, flows[i].dst, live[side * MAX_FLOWS + i],
                        fresh);
                mismatches++;
            }
        }
    printf("live %s: %d flow side(s) decided as v1 decides them, %d differ\n", endpoint,
           checked, mismatches);
    return mismatches;
}

/* Applies the v1 -> v2 difference of one endpoint to the ACTIVE policy map
 * write by write (no A/B flip), then checks the map holds exactly v2.
 * Returns 0 when applied, 2 when a write failed and was rolled back (the
 * map then holds exactly v1, checked, and v1's verdicts still hold,
 * checked: `*mismatches` counts disagreements), 1 on any other error. */
static int apply_diff(struct datapath *dp, const porin_compilation *v1, const porin_compilation *v2,
                      const char *endpoint, const struct flow *flows, size_t n, uint16_t *sport,
                      int *mismatches) {
    porin_diff *diff = NULL;
    porin_map_entries want;
    const char *map_name;
    const struct slot *fd;
    int applied, live;
    porin_result r;
    if (replace_policy(dp, v1, endpoint)) return 1;
    fd = &dp->policy[dp->active];
    map_name = dp->active ? "porin_policy_b" : "porin_policy_a";
    r = porin_compilation_policy_diff(v1, v2, endpoint, strlen(endpoint), &diff);
    if (r != PORIN_RESULT_OK) return fail("diff", r);
    applied = apply_changes(fd, map_name, endpoint, diff);
    if (applied == 0)
        printf("diff %s: %zu writes applied to the live map\n", endpoint, porin_diff_count(diff));
    porin_diff_free(diff);
    if (applied == 1) return 1;
    r = porin_compilation_policy_entries(applied == 2 ? v1 : v2, endpoint, strlen(endpoint),
                                         &want);
    if (r != PORIN_RESULT_OK) return fail("entries", r);
    if (map_equals(fd, &want, applied == 2 ? "v1" : "v2")) return 1;
    if (applied == 0) return 0;
    printf("rollback %s: live map equals v1 (%zu entries)\n", endpoint, want.count);
    live = check_live_sides(dp, v1, endpoint, flows, n, sport);
    if (live < 0) return 1;
    *mismatches += live;
    return 2;
}

int main(int argc, char **argv) {
    porin_session *session = NULL;
    porin_compilation *v1 = NULL, *v2 = NULL;
    struct datapath dp = {0};
    static struct flow flows[MAX_FLOWS];
    size_t n, i, inventory_len;
    char *inventory;
    uint16_t sport = 20000;
    int mismatches = 0, rolled_back = 0, status = 1;
    const char *fail_env = getenv("PORIN_AGENT_FAIL_AT_WRITE");
    porin_result r;

    if (argc != 5) {
        fprintf(stderr, "usage: %s INVENTORY POLICY_V1 POLICY_V2 FLOWS\n", argv[0]);
        return 2;
    }
    if (fail_env) fail_at_write = strtol(fail_env, NULL, 10);
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
        int applied;
        if (porin_compilation_endpoint_name(v2, i, &name) != PORIN_RESULT_OK) goto out;
        snprintf(endpoint, sizeof endpoint, "%.*s", (int)name.len, name.ptr);
        applied = apply_diff(&dp, v1, v2, endpoint, flows, n, &sport, &mismatches);
        if (applied == 1) goto out;
        rolled_back += applied == 2;
    }
    if (rolled_back) {
        /* v2 was refused for some endpoint: v1 stays in force everywhere
         * (an agent retries later or replaces the whole map). */
        printf("%d difference(s) rolled back, v1 stays in force\n", rolled_back);
        if (decide_all(&dp, v1, "v1", flows, n, &sport, &mismatches)) goto out;
    } else if (decide_all(&dp, v2, "v2", flows, n, &sport, &mismatches)) {
        goto out;
    }
    printf("%d mismatch(es)\n", mismatches);
    status = mismatches ? 1 : rolled_back ? 3 : 0;
out:
    if (dp.object) bpf_object__close(dp.object);
    porin_compilation_free(v1);
    porin_compilation_free(v2);
    porin_session_free(session);
    return status;
}
