/* A compile that fails through the C ABI (issue #8, "faults while
 * applying"): the caller is told (result code, diagnostics, last error),
 * nothing is emitted (the output handle is not written: no object and no
 * map entries for any endpoint, not even for endpoints the failure does
 * not concern), and the previous compilation handle stays valid and
 * byte-for-byte unchanged. Run under valgrind by
 * crates/capi/tests/capi/c_compile_failure.rs. Exit 0 = pass. */
#include <stdint.h>

#include "suite.h"

int suite_failures = 0;

static const char INVENTORY[] =
    "kind: Inventory\n"
    "endpoints:\n"
    "  - {name: frontend, namespace: prod, labels: {app: frontend, tier: web}, ips: [10.0.1.10]}\n"
    "  - {name: payment, namespace: prod, labels: {app: payment}, ips: [10.0.1.20]}\n"
    "  - {name: ledger, namespace: prod, labels: {app: ledger}, ips: [10.0.1.30]}\n";

static const char POLICY[] =
    "apiVersion: cilium.io/v2\n"
    "kind: CiliumNetworkPolicy\n"
    "metadata: {name: payment, namespace: prod}\n"
    "spec:\n"
    "  endpointSelector: {matchLabels: {app: payment}}\n"
    "  ingress:\n"
    "    - fromEndpoints: [{matchLabels: {tier: web}}]\n"
    "      toPorts: [{ports: [{port: \"8080\", protocol: TCP}]}]\n";

/* A valid policy for another endpoint (ledger): compiled alone it works. */
static const char LEDGER_POLICY[] =
    "apiVersion: cilium.io/v2\n"
    "kind: CiliumNetworkPolicy\n"
    "metadata: {name: ledger, namespace: prod}\n"
    "spec:\n"
    "  endpointSelector: {matchLabels: {app: ledger}}\n"
    "  ingress:\n"
    "    - fromEndpoints: [{matchLabels: {app: payment}}]\n"
    "      toPorts: [{ports: [{port: \"5432\", protocol: TCP}]}]\n";

/* Invalid for payment only: a port out of range. */
static const char INVALID_PAYMENT[] =
    "apiVersion: cilium.io/v2\n"
    "kind: CiliumNetworkPolicy\n"
    "metadata: {name: payment-bad, namespace: prod}\n"
    "spec:\n"
    "  endpointSelector: {matchLabels: {app: payment}}\n"
    "  ingress:\n"
    "    - fromEndpoints: [{matchLabels: {tier: web}}]\n"
    "      toPorts: [{ports: [{port: \"70000\", protocol: TCP}]}]\n";

/* An endpoint with a given identity number in the reserved range: the
 * inventory loads, the compile refuses it (COMPILE_FAILED). */
static const char CONFLICTING_IDENTITY[] =
    "kind: Inventory\n"
    "endpoints:\n"
    "  - {name: broken, namespace: prod, labels: {app: broken}, identity: 300}\n"
    "  - {name: other, namespace: prod, labels: {app: other}, identity: 300}\n";

#define SENTINEL ((porin_compilation *)0x1)

static void mix(uint64_t *h, const void *data, size_t len) {
    const uint8_t *p = data;
    size_t i;
    for (i = 0; i < len; i++) {
        *h ^= p[i];
        *h *= 1099511628211ULL;
    }
}

/* Everything an agent reads from a compilation. */
static uint64_t digest(const porin_compilation *c) {
    uint64_t h = 14695981039346656037ULL;
    const uint8_t *object = NULL;
    size_t len = 0, i, n = porin_compilation_endpoint_count(c);
    porin_map_entries e;
    porin_str name;
    porin_decision *decision = NULL;
    uint32_t family;
    CHECK_RESULT(porin_compilation_object(c, &object, &len), PORIN_RESULT_OK);
    mix(&h, object, len);
    mix(&h, &n, sizeof n);
    for (i = 0; i < n; i++) {
        CHECK_RESULT(porin_compilation_endpoint_name(c, i, &name), PORIN_RESULT_OK);
        mix(&h, name.ptr, name.len);
        CHECK_RESULT(porin_compilation_policy_entries(c, name.ptr, name.len, &e), PORIN_RESULT_OK);
        mix(&h, e.keys, e.count * e.key_size);
        mix(&h, e.values, e.count * e.value_size);
    }
    for (family = 4; family <= 6; family += 2) {
        CHECK_RESULT(porin_compilation_ipcache_entries(c, family, &e), PORIN_RESULT_OK);
        mix(&h, e.keys, e.count * e.key_size);
        mix(&h, e.values, e.count * e.value_size);
    }
    CHECK_RESULT(porin_compilation_decide(c, S("prod/frontend"), S("prod/payment"), 6, 8080,
                                          &decision),
                 PORIN_RESULT_OK);
    i = porin_decision_verdict(decision);
    mix(&h, &i, sizeof i);
    porin_decision_free(decision);
    return h;
}

/* The compile fails with `expected`; nothing is written to the output;
 * the session reports why; the previous compilation is unchanged. */
static void expect_failure(porin_session *session, porin_result expected,
                           const porin_compilation *previous, uint64_t previous_digest,
                           const char *what) {
    porin_compilation *out = SENTINEL;
    porin_diagnostics *diagnostics = NULL;
    const char *error = NULL;
    size_t error_len = 0;
    porin_result r = porin_session_compile(session, &out, &diagnostics);
    if (r != expected) {
        fprintf(stderr, "%s: compile returned %u, expected %u\n", what, (unsigned)r,
                (unsigned)expected);
        suite_failures++;
    }
    if (out != SENTINEL) {
        fprintf(stderr, "%s: a failed compile wrote its output handle\n", what);
        suite_failures++;
        if (out) porin_compilation_free(out);
    }
    CHECK_RESULT(porin_session_last_error(session, &error, &error_len), PORIN_RESULT_OK);
    if (error_len == 0) {
        fprintf(stderr, "%s: the failure has no message\n", what);
        suite_failures++;
    } else {
        printf("%s: %.*s\n", what, (int)error_len, error);
    }
    if (expected == PORIN_RESULT_POLICY_INVALID) {
        /* The findings explain the failure: at least one error. */
        size_t i, errors = 0;
        porin_diagnostic d;
        CHECK(diagnostics != NULL);
        for (i = 0; i < porin_diagnostics_count(diagnostics); i++)
            if (porin_diagnostics_get(diagnostics, i, &d) == PORIN_RESULT_OK &&
                d.severity == PORIN_SEVERITY_ERROR)
                errors++;
        CHECK(errors >= 1);
    }
    porin_diagnostics_free(diagnostics);
    if (digest(previous) != previous_digest) {
        fprintf(stderr, "%s: the previous compilation changed\n", what);
        suite_failures++;
    }
}

static void add_policy(porin_session *s, const char *name, const char *text) {
    CHECK_RESULT(porin_session_add_policy_bytes(s, name, strlen(name), (const uint8_t *)text,
                                                strlen(text)),
                 PORIN_RESULT_OK);
}

int main(void) {
    porin_session *session = NULL;
    porin_compilation *v1 = NULL, *v2 = NULL;
    porin_map_entries e;
    uint64_t v1_digest;
    char *deep;
    size_t i, depth = 200, at = 0;

    CHECK_RESULT(porin_session_new(&session), PORIN_RESULT_OK);
    CHECK_RESULT(porin_session_add_inventory_bytes(session, S("inventory.yaml"),
                                                   (const uint8_t *)INVENTORY,
                                                   sizeof INVENTORY - 1),
                 PORIN_RESULT_OK);
    add_policy(session, "payment.yaml", POLICY);
    CHECK_RESULT(porin_session_compile(session, &v1, NULL), PORIN_RESULT_OK);
    if (!v1) {
        fprintf(stderr, "the first compile failed\n");
        return 1;
    }
    v1_digest = digest(v1);

    /* 1. An invalid policy for payment next to a valid one for ledger: the
     * whole compile fails; ledger gets nothing either (no partial output). */
    add_policy(session, "ledger.yaml", LEDGER_POLICY);
    add_policy(session, "payment-bad.yaml", INVALID_PAYMENT);
    expect_failure(session, PORIN_RESULT_POLICY_INVALID, v1, v1_digest, "invalid policy");

    /* 2. A load limit exceeded: YAML nested deeper than the loader allows. */
    CHECK_RESULT(porin_session_clear_policies(session), PORIN_RESULT_OK);
    add_policy(session, "payment.yaml", POLICY);
    deep = malloc(2 * depth + 128);
    if (!deep) return 1;
    at += (size_t)sprintf(deep, "apiVersion: cilium.io/v2\nkind: CiliumNetworkPolicy\nx: ");
    for (i = 0; i < depth; i++) deep[at++] = '[';
    for (i = 0; i < depth; i++) deep[at++] = ']';
    deep[at++] = '\n';
    deep[at] = '\0';
    add_policy(session, "deep.yaml", deep);
    free(deep);
    expect_failure(session, PORIN_RESULT_POLICY_INVALID, v1, v1_digest, "nesting limit");

    /* 3. A failure of the compile stage itself (identity allocation: one
     * given number, two label sets). The inventory reader refuses a
     * reserved number on a pod itself, so that is no compile failure. */
    CHECK_RESULT(porin_session_clear_policies(session), PORIN_RESULT_OK);
    add_policy(session, "payment.yaml", POLICY);
    CHECK_RESULT(porin_session_add_inventory_bytes(session, S("conflict.yaml"),
                                                   (const uint8_t *)CONFLICTING_IDENTITY,
                                                   sizeof CONFLICTING_IDENTITY - 1),
                 PORIN_RESULT_OK);
    expect_failure(session, PORIN_RESULT_COMPILE_FAILED, v1, v1_digest, "conflicting identity");

    /* The session recovers once the cause is gone, and the previous
     * compilation still equals what it was, next to the new one. */
    CHECK_RESULT(porin_session_endpoint_remove(session, S("prod"), S("broken")), PORIN_RESULT_OK);
    add_policy(session, "ledger.yaml", LEDGER_POLICY);
    CHECK_RESULT(porin_session_compile(session, &v2, NULL), PORIN_RESULT_OK);
    CHECK(v2 != NULL);
    if (v2) {
        CHECK(digest(v2) != v1_digest);
        CHECK_RESULT(porin_compilation_policy_entries(v2, S("prod/ledger"), &e), PORIN_RESULT_OK);
        CHECK(e.count > 0);
    }
    CHECK(digest(v1) == v1_digest);
    CHECK_RESULT(porin_compilation_policy_entries(v1, S("prod/ledger"), &e), PORIN_RESULT_OK);

    porin_compilation_free(v1);
    porin_compilation_free(v2);
    porin_session_free(session);
    if (suite_failures) {
        fprintf(stderr, "%d check(s) failed\n", suite_failures);
        return 1;
    }
    printf("compile failure: all checks passed\n");
    return 0;
}
