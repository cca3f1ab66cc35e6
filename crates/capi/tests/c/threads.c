/* porin's C API from several threads at once, for valgrind's helgrind and
 * drd (run by crates/capi/tests/capi/c_threads.rs).
 *
 * The threading contract (crates/capi/src/lib.rs): sessions are used by
 * one thread at a time; compilations, diagnostics, decisions and
 * differences are immutable and may be shared. So here:
 *
 * - the main thread compiles v1 and v2 of a policy in its own session and
 *   computes a digest of everything readable from them single-threaded;
 * - THREADS threads then read the SAME two compilations and the same
 *   diagnostics concurrently (object bytes, endpoint names, identities and
 *   address lookups, policy and ipcache entries, reference decisions with
 *   their explanations, policy and ipcache differences, rendered and
 *   individual diagnostics, result messages) and each also compiles the
 *   same inputs in a session of its own;
 * - every digest a thread computes must equal the single-threaded one.
 *
 * argv[1]: the example data directory (inventory.yaml, policy-v1.yaml,
 * policy-v2.yaml). Exit 0 and "threads: all checks passed" on success. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "porin.h"

#define THREADS 4
#define ROUNDS 2

struct inputs {
    char *inventory, *v1, *v2;
    size_t inventory_len, v1_len, v2_len;
};

struct shared {
    const struct inputs *inputs;
    const porin_compilation *v1, *v2;
    const porin_diagnostics *diagnostics;
    uint64_t want_shared, want_own;
};

struct worker {
    pthread_t thread;
    const struct shared *shared;
    int failures;
};

/* FNV-1a, 64 bit: order-sensitive, so equal digests mean equal results. */
static void mix(uint64_t *h, const void *data, size_t len) {
    const uint8_t *p = data;
    size_t i;
    for (i = 0; i < len; i++) {
        *h ^= p[i];
        *h *= 1099511628211ULL;
    }
}

static void mix_u64(uint64_t *h, uint64_t v) { mix(h, &v, sizeof v); }

static void mix_entries(uint64_t *h, const porin_map_entries *e) {
    mix_u64(h, e->count);
    mix(h, e->keys, e->count * e->key_size);
    mix(h, e->values, e->count * e->value_size);
}

static void mix_diff(uint64_t *h, porin_diff *diff, int *failures) {
    size_t i, n = porin_diff_count(diff);
    porin_change change;
    mix_u64(h, n);
    for (i = 0; i < n; i++) {
        if (porin_diff_get(diff, i, &change) != PORIN_RESULT_OK) {
            (*failures)++;
            continue;
        }
        mix_u64(h, change.kind);
        mix(h, change.key, change.key_size);
        if (change.value) mix(h, change.value, change.value_size);
    }
    porin_diff_free(diff);
}

static const char *const ADDRESSES[] = {"10.0.1.10", "10.0.1.20", "10.0.1.30",
                                        "10.9.9.9", "fd00::1", "not-an-address"};
static const char *const PEERS[] = {"shop/frontend", "shop/api", "shop/db", "world", "10.0.1.20"};
static const struct {
    uint8_t proto;
    uint16_t port;
} PORTS[] = {{6, 80}, {6, 8080}, {6, 5432}, {17, 53}, {1, 8}};

/* Everything readable from a compilation (and the v1 -> v2 differences). */
static uint64_t digest_compilation(const porin_compilation *v1, const porin_compilation *v2,
                                   int *failures) {
    uint64_t h = 14695981039346656037ULL;
    const uint8_t *object;
    size_t len, i, j, k, n = porin_compilation_endpoint_count(v1);
    porin_map_entries entries;
    porin_str name, text;
    porin_diff *diff;
    uint32_t identity, family;

    if (porin_compilation_object(v1, &object, &len) == PORIN_RESULT_OK)
        mix(&h, object, len);
    else
        (*failures)++;
    mix_u64(&h, n);
    for (i = 0; i < n; i++) {
        char endpoint[256];
        if (porin_compilation_endpoint_name(v1, i, &name) != PORIN_RESULT_OK) {
            (*failures)++;
            continue;
        }
        mix(&h, name.ptr, name.len);
        snprintf(endpoint, sizeof endpoint, "%.*s", (int)name.len, name.ptr);
        if (porin_compilation_endpoint_identity(v1, endpoint, strlen(endpoint), &identity) ==
            PORIN_RESULT_OK)
            mix_u64(&h, identity);
        else
            (*failures)++;
        if (porin_compilation_policy_entries(v1, endpoint, strlen(endpoint), &entries) ==
            PORIN_RESULT_OK)
            mix_entries(&h, &entries);
        else
            (*failures)++;
        if (porin_compilation_policy_diff(v1, v2, endpoint, strlen(endpoint), &diff) ==
            PORIN_RESULT_OK)
            mix_diff(&h, diff, failures);
        else
            (*failures)++;
    }
    for (family = 4; family <= 6; family += 2) {
        if (porin_compilation_ipcache_entries(v1, family, &entries) == PORIN_RESULT_OK)
            mix_entries(&h, &entries);
        else
            (*failures)++;
        if (porin_compilation_ipcache_diff(v1, v2, family, &diff) == PORIN_RESULT_OK)
            mix_diff(&h, diff, failures);
        else
            (*failures)++;
    }
    for (i = 0; i < sizeof ADDRESSES / sizeof ADDRESSES[0]; i++) {
        porin_result r = porin_compilation_endpoint_by_address(v1, ADDRESSES[i],
                                                               strlen(ADDRESSES[i]), &name);
        mix_u64(&h, r);
        if (r == PORIN_RESULT_OK) mix(&h, name.ptr, name.len);
    }
    for (i = 0; i < sizeof PEERS / sizeof PEERS[0]; i++)
        for (j = 0; j < sizeof PEERS / sizeof PEERS[0]; j++)
            for (k = 0; k < sizeof PORTS / sizeof PORTS[0]; k++) {
                porin_decision *decision = NULL;
                porin_result r = porin_compilation_decide(
                    v1, PEERS[i], strlen(PEERS[i]), PEERS[j], strlen(PEERS[j]),
                    PORTS[k].proto, PORTS[k].port, &decision);
                mix_u64(&h, r);
                if (r != PORIN_RESULT_OK) continue;
                mix_u64(&h, porin_decision_verdict(decision));
                if (porin_decision_explanation(decision, &text) == PORIN_RESULT_OK)
                    mix(&h, text.ptr, text.len);
                else
                    (*failures)++;
                porin_decision_free(decision);
            }
    return h;
}

static uint64_t digest_diagnostics(const porin_diagnostics *diagnostics, int *failures) {
    uint64_t h = 14695981039346656037ULL;
    size_t i, n = porin_diagnostics_count(diagnostics);
    porin_diagnostic d;
    porin_str text;
    char message[PORIN_RESULT_MESSAGE_MAX];
    mix_u64(&h, n);
    for (i = 0; i < n; i++) {
        if (porin_diagnostics_get(diagnostics, i, &d) != PORIN_RESULT_OK) {
            (*failures)++;
            continue;
        }
        mix(&h, d.code.ptr, d.code.len);
        mix(&h, d.message.ptr, d.message.len);
        mix(&h, d.route.ptr, d.route.len);
        mix_u64(&h, ((uint64_t)d.line << 32) | d.column);
    }
    if (porin_diagnostics_render(diagnostics, &text) == PORIN_RESULT_OK)
        mix(&h, text.ptr, text.len);
    else
        (*failures)++;
    for (i = 0; i < 16; i++) {
        if (porin_result_message((uint32_t)i, message, sizeof message, &n) == PORIN_RESULT_OK)
            mix(&h, message, n);
    }
    return h;
}

/* Compiles v1 and v2 in a new session; returns 0 on success. */
static int compile_both(const struct inputs *in, porin_compilation **v1, porin_compilation **v2,
                        porin_diagnostics **diagnostics) {
    porin_session *session = NULL;
    int ok = porin_session_new(&session) == PORIN_RESULT_OK &&
             porin_session_add_inventory_bytes(session, "inventory.yaml", 14,
                                               (const uint8_t *)in->inventory,
                                               in->inventory_len) == PORIN_RESULT_OK &&
             porin_session_add_policy_bytes(session, "policy-v1.yaml", 14,
                                            (const uint8_t *)in->v1, in->v1_len) ==
                 PORIN_RESULT_OK &&
             porin_session_compile(session, v1, diagnostics) == PORIN_RESULT_OK &&
             porin_session_clear_policies(session) == PORIN_RESULT_OK &&
             porin_session_add_policy_bytes(session, "policy-v2.yaml", 14,
                                            (const uint8_t *)in->v2, in->v2_len) ==
                 PORIN_RESULT_OK &&
             porin_session_compile(session, v2, NULL) == PORIN_RESULT_OK;
    porin_session_free(session);
    return ok ? 0 : 1;
}

static uint64_t digest_all(const porin_compilation *v1, const porin_compilation *v2,
                           const porin_diagnostics *diagnostics, int *failures) {
    uint64_t h = digest_compilation(v1, v2, failures);
    mix_u64(&h, digest_compilation(v2, v1, failures));
    mix_u64(&h, digest_diagnostics(diagnostics, failures));
    return h;
}

static void *work(void *arg) {
    struct worker *w = arg;
    const struct shared *s = w->shared;
    int round;
    for (round = 0; round < ROUNDS; round++) {
        porin_compilation *v1 = NULL, *v2 = NULL;
        porin_diagnostics *diagnostics = NULL;
        /* The shared handles, read by every thread at the same time. */
        if (digest_all(s->v1, s->v2, s->diagnostics, &w->failures) != s->want_shared) {
            fprintf(stderr, "threads: a shared-handle digest differs from the single-threaded one\n");
            w->failures++;
        }
        /* A session of this thread's own, compiling while the others read. */
        if (compile_both(s->inputs, &v1, &v2, &diagnostics)) {
            fprintf(stderr, "threads: a thread's own compile failed\n");
            w->failures++;
        } else if (digest_all(v1, v2, diagnostics, &w->failures) != s->want_own) {
            fprintf(stderr, "threads: a thread's own compilation differs from the main one\n");
            w->failures++;
        }
        porin_compilation_free(v1);
        porin_compilation_free(v2);
        porin_diagnostics_free(diagnostics);
    }
    return NULL;
}

static char *read_file(const char *dir, const char *name, size_t *len) {
    char path[4096];
    FILE *f;
    char *data = NULL;
    long size;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (!(f = fopen(path, "rb"))) return NULL;
    if (fseek(f, 0, SEEK_END) == 0 && (size = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0 &&
        (data = malloc((size_t)size + 1)) != NULL) {
        if (fread(data, 1, (size_t)size, f) != (size_t)size) {
            free(data);
            data = NULL;
        } else {
            *len = (size_t)size;
        }
    }
    fclose(f);
    return data;
}

int main(int argc, char **argv) {
    struct inputs in = {0};
    struct shared s = {0};
    struct worker workers[THREADS];
    porin_compilation *v1 = NULL, *v2 = NULL, *own1 = NULL, *own2 = NULL;
    porin_diagnostics *diagnostics = NULL, *own_diagnostics = NULL;
    int failures = 0, i, status = 1;

    if (argc != 2) {
        fprintf(stderr, "usage: %s EXAMPLE_DATA_DIR\n", argv[0]);
        return 2;
    }
    in.inventory = read_file(argv[1], "inventory.yaml", &in.inventory_len);
    in.v1 = read_file(argv[1], "policy-v1.yaml", &in.v1_len);
    in.v2 = read_file(argv[1], "policy-v2.yaml", &in.v2_len);
    if (!in.inventory || !in.v1 || !in.v2) {
        fprintf(stderr, "threads: cannot read the example data in %s\n", argv[1]);
        goto out;
    }
    /* Single-threaded reference: the shared handles, and a second
     * compilation of the same inputs (what each thread's own session must
     * reproduce). */
    if (compile_both(&in, &v1, &v2, &diagnostics) ||
        compile_both(&in, &own1, &own2, &own_diagnostics)) {
        fprintf(stderr, "threads: compiling the example policy failed\n");
        goto out;
    }
    if (porin_compilation_endpoint_count(v1) == 0) {
        fprintf(stderr, "threads: the example compiles to no endpoint\n");
        goto out;
    }
    s.inputs = &in;
    s.v1 = v1;
    s.v2 = v2;
    s.diagnostics = diagnostics;
    s.want_shared = digest_all(v1, v2, diagnostics, &failures);
    s.want_own = digest_all(own1, own2, own_diagnostics, &failures);
    for (i = 0; i < THREADS; i++) {
        workers[i].shared = &s;
        workers[i].failures = 0;
        if (pthread_create(&workers[i].thread, NULL, work, &workers[i]) != 0) {
            fprintf(stderr, "threads: pthread_create failed\n");
            return 1; /* cannot join what was not started; exit at once */
        }
    }
    for (i = 0; i < THREADS; i++) {
        pthread_join(workers[i].thread, NULL);
        failures += workers[i].failures;
    }
    printf("threads: %d threads x %d rounds, digest %016llx\n", THREADS, ROUNDS,
           (unsigned long long)s.want_shared);
    if (failures == 0) {
        printf("threads: all checks passed\n");
        status = 0;
    } else {
        fprintf(stderr, "threads: %d failure(s)\n", failures);
    }
out:
    porin_compilation_free(v1);
    porin_compilation_free(v2);
    porin_compilation_free(own1);
    porin_compilation_free(own2);
    porin_diagnostics_free(diagnostics);
    porin_diagnostics_free(own_diagnostics);
    free(in.inventory);
    free(in.v1);
    free(in.v2);
    return status;
}
