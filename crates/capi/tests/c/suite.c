/* The C test suite of porin's C API: every function, every misuse.
 * Built with -std=c11 -Wall -Wextra -Werror -pedantic and run under
 * valgrind by crates/capi/tests/capi/c_suite.rs. argv[1]: a directory of
 * policy files (the repository's fixtures/examples). Exit 0 = pass. */
#include <stdint.h>

#include "suite.h"

int suite_failures = 0;

static const char POLICY[] =
    "apiVersion: cilium.io/v2\n"
    "kind: CiliumNetworkPolicy\n"
    "metadata: {name: payment, namespace: prod}\n"
    "spec:\n"
    "  endpointSelector: {matchLabels: {app: payment}}\n"
    "  ingress:\n"
    "    - fromEndpoints: [{matchLabels: {tier: web}}]\n"
    "      toPorts: [{ports: [{port: \"8080\", protocol: TCP}]}]\n";

/* The same policy, narrowed: port 8080 becomes 9090. */
static const char POLICY_V2[] =
    "apiVersion: cilium.io/v2\n"
    "kind: CiliumNetworkPolicy\n"
    "metadata: {name: payment, namespace: prod}\n"
    "spec:\n"
    "  endpointSelector: {matchLabels: {app: payment}}\n"
    "  ingress:\n"
    "    - fromEndpoints: [{matchLabels: {tier: web}}]\n"
    "      toPorts: [{ports: [{port: \"9090\", protocol: TCP}]}]\n";

/* A CiliumCIDRGroup, a text of its own beside POLICY. */
static const char GROUPS[] =
    "apiVersion: cilium.io/v2\n"
    "kind: CiliumCIDRGroup\n"
    "metadata: {name: partners}\n"
    "spec:\n"
    "  externalCIDRs: [203.0.113.0/24]\n";

/* Fails to compile: an unknown field (PM003) in line 5. */
static const char BAD_POLICY[] =
    "apiVersion: cilium.io/v2\n"
    "kind: CiliumNetworkPolicy\n"
    "metadata: {name: bad, namespace: prod}\n"
    "spec:\n"
    "  endpointSelectr: {matchLabels: {app: payment}}\n"
    "  ingress:\n"
    "    - fromEndpoints: [{matchLabels: {tier: web}}]\n";

static const char INVENTORY[] =
    "kind: Inventory\n"
    "endpoints:\n"
    "  - {name: frontend, namespace: prod, labels: {app: frontend, tier: web}, ips: [10.0.1.10]}\n"
    "  - {name: payment, namespace: prod, labels: {app: payment}, ips: [10.0.1.20, fd00::20]}\n";

static const char INVALID_UTF8[] = "ab\xff\xfe";

/* Whether a borrowed porin_str holds exactly the NUL-terminated `text`. */
static int str_eq(porin_str s, const char *text) {
    size_t n = strlen(text);
    return s.len == n && (n == 0 || memcmp(s.ptr, text, n) == 0);
}

static void check_result_messages(void) {
    char buf[PORIN_RESULT_MESSAGE_MAX];
    size_t n = 12345;
    const uint32_t codes[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 100, 101, 200, 201, 202, 203, 300};
    size_t i;
    for (i = 0; i < sizeof codes / sizeof codes[0]; i++) {
        n = 0;
        CHECK_RESULT(porin_result_message(codes[i], buf, sizeof buf, &n), PORIN_RESULT_OK);
        CHECK(n > 0 && n == strlen(buf));
    }
    n = 777;
    CHECK_RESULT(porin_result_message(77, buf, sizeof buf, &n), PORIN_RESULT_INVALID_PARAMETER);
    CHECK(n == 777); /* outputs only on success */
    CHECK_RESULT(porin_result_message(0, NULL, sizeof buf, &n), PORIN_RESULT_NULL_PARAMETER);
    CHECK_RESULT(porin_result_message(0, buf, sizeof buf, NULL), PORIN_RESULT_NULL_PARAMETER);
    CHECK_RESULT(porin_result_message(0, buf, 3, &n), PORIN_RESULT_BUFFER_TOO_SMALL);
    CHECK(n == 777);
    CHECK_RESULT(porin_result_message(0, buf, 0, &n), PORIN_RESULT_BUFFER_TOO_SMALL);
}

static porin_session *new_session(void) {
    porin_session *session = NULL;
    CHECK_RESULT(porin_session_new(&session), PORIN_RESULT_OK);
    CHECK(session != NULL);
    return session;
}

static void check_session_misuse(const char *fixtures) {
    porin_session *session = new_session();
    const char *error = NULL;
    size_t error_len = 0;
    porin_label label = {{S("app")}, {S("x")}};
    porin_label bad_label = {{INVALID_UTF8, sizeof INVALID_UTF8 - 1}, {S("x")}};
    porin_label empty_key = {{NULL, 0}, {S("x")}};
    porin_str ip = {S("10.9.9.9")};
    porin_str bad_ip = {S("10.9.9.999")};

    CHECK_RESULT(porin_session_new(NULL), PORIN_RESULT_NULL_PARAMETER);
    /* NULL handles and NULL buffers with a length. */
    CHECK_RESULT(porin_session_add_policy_bytes(NULL, S("p"), (const uint8_t *)POLICY, 3),
                 PORIN_RESULT_NULL_PARAMETER);
    CHECK_RESULT(porin_session_add_policy_bytes(session, S("p"), NULL, 3),
                 PORIN_RESULT_NULL_PARAMETER);
    CHECK_RESULT(porin_session_add_policy_bytes(session, NULL, 1, (const uint8_t *)POLICY, 3),
                 PORIN_RESULT_NULL_PARAMETER);
    CHECK_RESULT(porin_session_last_error(session, &error, &error_len), PORIN_RESULT_OK);
    CHECK(error_len > 0);
    CHECK_RESULT(porin_session_last_error(session, NULL, &error_len),
                 PORIN_RESULT_NULL_PARAMETER);
    CHECK_RESULT(porin_session_last_error(NULL, &error, &error_len),
                 PORIN_RESULT_NULL_PARAMETER);
    /* Invalid UTF-8 in data and in names. */
    CHECK_RESULT(porin_session_add_policy_bytes(session, S("p"), (const uint8_t *)INVALID_UTF8,
                                                sizeof INVALID_UTF8 - 1),
                 PORIN_RESULT_INVALID_UTF8);
    CHECK_RESULT(porin_session_add_policy_bytes(session, INVALID_UTF8, sizeof INVALID_UTF8 - 1,
                                                (const uint8_t *)POLICY, sizeof POLICY - 1),
                 PORIN_RESULT_INVALID_UTF8);
    CHECK_RESULT(porin_session_add_inventory_bytes(session, S("i"), (const uint8_t *)INVALID_UTF8,
                                                   sizeof INVALID_UTF8 - 1),
                 PORIN_RESULT_INVALID_UTF8);
    CHECK_RESULT(porin_session_add_inventory_bytes(NULL, S("i"), (const uint8_t *)INVENTORY, 1),
                 PORIN_RESULT_NULL_PARAMETER);
    CHECK_RESULT(porin_session_add_inventory_bytes(session, S("i"), (const uint8_t *)S("{[")),
                 PORIN_RESULT_INVENTORY_INVALID);
    CHECK_RESULT(porin_session_last_error(session, &error, &error_len), PORIN_RESULT_OK);
    CHECK(error_len > 0);
    /* Paths: missing, stdin, empty, invalid UTF-8, a real directory. */
    CHECK_RESULT(porin_session_add_policy_path(session, S("/nonexistent/porin")), PORIN_RESULT_IO);
    CHECK_RESULT(porin_session_add_policy_path(session, S("-")), PORIN_RESULT_INVALID_PARAMETER);
    CHECK_RESULT(porin_session_add_policy_path(session, "", 0), PORIN_RESULT_INVALID_PARAMETER);
    CHECK_RESULT(porin_session_add_policy_path(session, NULL, 4), PORIN_RESULT_NULL_PARAMETER);
    CHECK_RESULT(porin_session_add_policy_path(NULL, S("/")), PORIN_RESULT_NULL_PARAMETER);
    CHECK_RESULT(porin_session_add_policy_path(session, INVALID_UTF8, sizeof INVALID_UTF8 - 1),
                 PORIN_RESULT_INVALID_UTF8);
    CHECK_RESULT(porin_session_add_policy_path(session, fixtures, strlen(fixtures)),
                 PORIN_RESULT_OK);
    CHECK_RESULT(porin_session_add_inventory_path(session, S("/nonexistent/porin")),
                 PORIN_RESULT_IO);
    CHECK_RESULT(porin_session_add_inventory_path(session, S("-")),
                 PORIN_RESULT_INVALID_PARAMETER);
    CHECK_RESULT(porin_session_add_inventory_path(NULL, S("/")), PORIN_RESULT_NULL_PARAMETER);
    /* Endpoints. */
    CHECK_RESULT(porin_session_endpoint_add(session, S("ns"), S("a"), &label, 1, &ip, 1),
                 PORIN_RESULT_OK);
    CHECK_RESULT(porin_session_endpoint_add(session, S("ns"), S("a"), &label, 1, NULL, 0),
                 PORIN_RESULT_ALREADY_EXISTS);
    CHECK_RESULT(porin_session_endpoint_add(session, S("ns"), S("b"), &label, 1, &bad_ip, 1),
                 PORIN_RESULT_INVALID_PARAMETER);
    CHECK_RESULT(porin_session_endpoint_add(session, S("ns"), "", 0, &label, 1, NULL, 0),
                 PORIN_RESULT_INVALID_PARAMETER);
    CHECK_RESULT(porin_session_endpoint_add(session, S("ns"), S("c"), NULL, 2, NULL, 0),
                 PORIN_RESULT_NULL_PARAMETER);
    CHECK_RESULT(porin_session_endpoint_add(session, S("ns"), S("c"), &label, 1, NULL, 1),
                 PORIN_RESULT_NULL_PARAMETER);
    CHECK_RESULT(porin_session_endpoint_add(session, S("ns"), S("c"), &bad_label, 1, NULL, 0),
                 PORIN_RESULT_INVALID_UTF8);
    CHECK_RESULT(porin_session_endpoint_add(session, S("ns"), S("c"), &empty_key, 1, NULL, 0),
                 PORIN_RESULT_INVALID_PARAMETER);
    CHECK_RESULT(porin_session_endpoint_add(NULL, S("ns"), S("c"), NULL, 0, NULL, 0),
                 PORIN_RESULT_NULL_PARAMETER);
    /* No namespace: an endpoint outside Kubernetes. */
    CHECK_RESULT(porin_session_endpoint_add(session, NULL, 0, S("vm1"), &label, 1, NULL, 0),
                 PORIN_RESULT_OK);
    CHECK_RESULT(porin_session_endpoint_set_labels(session, S("ns"), S("zzz"), &label, 1),
                 PORIN_RESULT_NOT_FOUND);
    CHECK_RESULT(porin_session_endpoint_set_labels(session, S("ns"), S("a"), NULL, 1),
                 PORIN_RESULT_NULL_PARAMETER);
    CHECK_RESULT(porin_session_endpoint_set_labels(NULL, S("ns"), S("a"), NULL, 0),
                 PORIN_RESULT_NULL_PARAMETER);
    CHECK_RESULT(porin_session_endpoint_remove(session, S("ns"), S("zzz")), PORIN_RESULT_NOT_FOUND);
    CHECK_RESULT(porin_session_endpoint_remove(session, NULL, 0, S("vm1")), PORIN_RESULT_OK);
    CHECK_RESULT(porin_session_endpoint_remove(NULL, NULL, 0, S("vm1")),
                 PORIN_RESULT_NULL_PARAMETER);
    CHECK_RESULT(porin_session_endpoint_remove(session, S("ns"), INVALID_UTF8, 3),
                 PORIN_RESULT_INVALID_UTF8);
    /* Compile with NULL outputs. */
    CHECK_RESULT(porin_session_compile(session, NULL, NULL), PORIN_RESULT_NULL_PARAMETER);
    CHECK_RESULT(porin_session_compile(NULL, NULL, NULL), PORIN_RESULT_NULL_PARAMETER);
    {
        size_t reused = 99, computed = 99;
        CHECK_RESULT(porin_session_compile_stats(session, NULL, &computed),
                     PORIN_RESULT_NULL_PARAMETER);
        CHECK_RESULT(porin_session_compile_stats(NULL, &reused, &computed),
                     PORIN_RESULT_NULL_PARAMETER);
        CHECK_RESULT(porin_session_compile_stats(session, &reused, &computed), PORIN_RESULT_OK);
        CHECK(reused == 0 && computed == 0);
    }
    /* The fixtures compile (no diagnostics pointer: allowed). */
    {
        porin_compilation *compilation = NULL;
        CHECK_RESULT(porin_session_compile(session, &compilation, NULL), PORIN_RESULT_OK);
        CHECK(compilation != NULL);
        CHECK(porin_compilation_endpoint_count(compilation) == 1);
        porin_compilation_free(compilation);
    }
    porin_session_free(session);
    /* Double free and use after free: detected, no-op / INVALID_HANDLE. */
    porin_session_free(session);
    CHECK_RESULT(porin_session_endpoint_remove(session, S("ns"), S("a")),
                 PORIN_RESULT_INVALID_HANDLE);
    porin_session_free(NULL);
}

static void check_failing_policy(void) {
    porin_session *session = new_session();
    porin_compilation *compilation = (porin_compilation *)0x1;
    porin_diagnostics *diagnostics = NULL;
    porin_diagnostic d;
    size_t i, errors = 0;
    int unknown_field_found = 0;
    const char *error = NULL;
    size_t error_len = 0;
    porin_str rendered;

    CHECK_RESULT(porin_session_add_policy_bytes(session, S("bad.yaml"),
                                                (const uint8_t *)BAD_POLICY, sizeof BAD_POLICY - 1),
                 PORIN_RESULT_OK);
    CHECK_RESULT(porin_session_compile(session, &compilation, &diagnostics),
                 PORIN_RESULT_POLICY_INVALID);
    CHECK(compilation == (porin_compilation *)0x1); /* not written on failure */
    CHECK(diagnostics != NULL);
    CHECK(porin_diagnostics_count(diagnostics) >= 1);
    for (i = 0; i < porin_diagnostics_count(diagnostics); i++) {
        CHECK_RESULT(porin_diagnostics_get(diagnostics, i, &d), PORIN_RESULT_OK);
        if (d.severity == PORIN_SEVERITY_ERROR) {
            errors++;
            CHECK(d.code.len == 5 && memcmp(d.code.ptr, "PM", 2) == 0);
            CHECK(d.file.len == 8 && memcmp(d.file.ptr, "bad.yaml", 8) == 0);
            CHECK(d.line >= 1 && d.column >= 1);
            if (memcmp(d.code.ptr, "PM003", 5) == 0 && d.line == 5 && d.column == 3 &&
                d.route.len == 20 && memcmp(d.route.ptr, "spec.endpointSelectr", 20) == 0)
                unknown_field_found = 1;
            CHECK(d.message.len > 0);
        }
    }
    CHECK(errors >= 1);
    CHECK(unknown_field_found);
    CHECK_RESULT(porin_diagnostics_get(diagnostics, 1000, &d), PORIN_RESULT_INVALID_PARAMETER);
    CHECK_RESULT(porin_diagnostics_get(diagnostics, 0, NULL), PORIN_RESULT_NULL_PARAMETER);
    CHECK_RESULT(porin_diagnostics_get(NULL, 0, &d), PORIN_RESULT_NULL_PARAMETER);
    CHECK_RESULT(porin_diagnostics_render(diagnostics, &rendered), PORIN_RESULT_OK);
    CHECK(rendered.len > 0 && memcmp(rendered.ptr, "error[", 6) == 0);
    CHECK_RESULT(porin_diagnostics_render(diagnostics, NULL), PORIN_RESULT_NULL_PARAMETER);
    CHECK_RESULT(porin_diagnostics_render(NULL, &rendered), PORIN_RESULT_NULL_PARAMETER);
    CHECK_RESULT(porin_session_last_error(session, &error, &error_len), PORIN_RESULT_OK);
    CHECK(error_len > 0);
    porin_diagnostics_free(diagnostics);
    porin_diagnostics_free(diagnostics); /* detected */
    CHECK(porin_diagnostics_count(diagnostics) == 0);
    CHECK_RESULT(porin_diagnostics_render(diagnostics, &rendered), PORIN_RESULT_INVALID_HANDLE);
    porin_diagnostics_free(NULL);
    CHECK(porin_diagnostics_count(NULL) == 0);
    porin_session_free(session);
}

/* Two documents naming one object (prod/payment, in two texts): a cluster
 * keeps one, so the session refuses the set (PM042 at the later copy)
 * instead of applying both; clearing and adding one copy compiles. */
static void check_duplicate_policy(void) {
    porin_session *session = new_session();
    porin_compilation *compilation = (porin_compilation *)0x1;
    porin_diagnostics *diagnostics = NULL;
    porin_diagnostic d;
    size_t i;
    int duplicate_found = 0;

    CHECK_RESULT(porin_session_add_inventory_bytes(session, S("inventory.yaml"),
                                                   (const uint8_t *)INVENTORY,
                                                   sizeof INVENTORY - 1),
                 PORIN_RESULT_OK);
    CHECK_RESULT(porin_session_add_policy_bytes(session, S("a.yaml"), (const uint8_t *)POLICY,
                                                sizeof POLICY - 1),
                 PORIN_RESULT_OK);
    CHECK_RESULT(porin_session_add_policy_bytes(session, S("b.yaml"),
                                                (const uint8_t *)POLICY_V2, sizeof POLICY_V2 - 1),
                 PORIN_RESULT_OK);
    CHECK_RESULT(porin_session_compile(session, &compilation, &diagnostics),
                 PORIN_RESULT_POLICY_INVALID);
    CHECK(compilation == (porin_compilation *)0x1);
    CHECK(diagnostics != NULL);
    for (i = 0; i < porin_diagnostics_count(diagnostics); i++) {
        CHECK_RESULT(porin_diagnostics_get(diagnostics, i, &d), PORIN_RESULT_OK);
        if (d.severity == PORIN_SEVERITY_ERROR && d.code.len == 5 &&
            memcmp(d.code.ptr, "PM042", 5) == 0 && d.file.len == 6 &&
            memcmp(d.file.ptr, "b.yaml", 6) == 0 && d.line == 3)
            duplicate_found = 1;
    }
    CHECK(duplicate_found);
    porin_diagnostics_free(diagnostics);
    CHECK_RESULT(porin_session_clear_policies(session), PORIN_RESULT_OK);
    CHECK_RESULT(porin_session_add_policy_bytes(session, S("b.yaml"),
                                                (const uint8_t *)POLICY_V2, sizeof POLICY_V2 - 1),
                 PORIN_RESULT_OK);
    compilation = NULL;
    CHECK_RESULT(porin_session_compile(session, &compilation, NULL), PORIN_RESULT_OK);
    porin_compilation_free(compilation);
    porin_session_free(session);
}

static porin_compilation *compile_ok(porin_session *session) {
    porin_compilation *compilation = NULL;
    porin_diagnostics *diagnostics = NULL;
    porin_str rendered;
    CHECK_RESULT(porin_session_compile(session, &compilation, &diagnostics), PORIN_RESULT_OK);
    CHECK(compilation != NULL && diagnostics != NULL);
    CHECK_RESULT(porin_diagnostics_render(diagnostics, &rendered), PORIN_RESULT_OK);
    porin_diagnostics_free(diagnostics);
    return compilation;
}

static porin_verdict decide(const porin_compilation *c, const char *from, const char *to,
                            uint8_t proto, uint16_t port) {
    porin_decision *decision = NULL;
    porin_str explanation;
    porin_verdict verdict;
    CHECK_RESULT(porin_compilation_decide(c, from, strlen(from), to, strlen(to), proto, port,
                                          &decision),
                 PORIN_RESULT_OK);
    CHECK_RESULT(porin_decision_explanation(decision, &explanation), PORIN_RESULT_OK);
    CHECK(explanation.len > 0);
    verdict = porin_decision_verdict(decision);
    porin_decision_free(decision);
    return verdict;
}

static void check_compilation(void) {
    porin_session *session = new_session();
    porin_compilation *c1, *c2, *c3;
    const uint8_t *object = NULL;
    size_t object_len = 0, i, reused = 0, computed = 0;
    porin_str name;
    uint32_t identity = 0, frontend_identity = 0;
    porin_map_entries entries;
    porin_decision *decision = NULL;
    porin_diff *diff = NULL;
    porin_change change;
    porin_connectivity_diff *connectivity = NULL;
    porin_connectivity_change moved;
    porin_label web[] = {{{S("app")}, {S("canary")}}, {{S("tier")}, {S("web")}}};
    porin_str canary_ip = {S("10.0.1.30")};
    porin_str explanation;

    CHECK_RESULT(porin_session_add_policy_bytes(session, S("policy.yaml"),
                                                (const uint8_t *)POLICY, sizeof POLICY - 1),
                 PORIN_RESULT_OK);
    CHECK_RESULT(porin_session_add_inventory_bytes(session, S("inventory.yaml"),
                                                   (const uint8_t *)INVENTORY,
                                                   sizeof INVENTORY - 1),
                 PORIN_RESULT_OK);
    c1 = compile_ok(session);

    /* Object bytes: an ELF file. */
    CHECK_RESULT(porin_compilation_object(c1, &object, &object_len), PORIN_RESULT_OK);
    CHECK(object_len > 64 && memcmp(object, "\177ELF", 4) == 0);
    CHECK_RESULT(porin_compilation_object(c1, NULL, &object_len), PORIN_RESULT_NULL_PARAMETER);
    CHECK_RESULT(porin_compilation_object(c1, &object, NULL), PORIN_RESULT_NULL_PARAMETER);
    CHECK_RESULT(porin_compilation_object(NULL, &object, &object_len),
                 PORIN_RESULT_NULL_PARAMETER);

    /* Endpoints. */
    CHECK(porin_compilation_endpoint_count(c1) == 2);
    CHECK(porin_compilation_endpoint_count(NULL) == 0);
    CHECK_RESULT(porin_compilation_endpoint_name(c1, 0, &name), PORIN_RESULT_OK);
    CHECK(name.len == 13 && memcmp(name.ptr, "prod/frontend", 13) == 0);
    CHECK_RESULT(porin_compilation_endpoint_name(c1, 2, &name), PORIN_RESULT_INVALID_PARAMETER);
    CHECK_RESULT(porin_compilation_endpoint_name(c1, 0, NULL), PORIN_RESULT_NULL_PARAMETER);
    CHECK_RESULT(porin_compilation_endpoint_name(NULL, 0, &name), PORIN_RESULT_NULL_PARAMETER);
    CHECK_RESULT(porin_compilation_endpoint_identity(c1, S("prod/payment"), &identity),
                 PORIN_RESULT_OK);
    CHECK(identity >= 256);
    CHECK_RESULT(porin_compilation_endpoint_by_address(c1, S("fd00::20"), &name),
                 PORIN_RESULT_OK);
    CHECK(name.len == 12 && memcmp(name.ptr, "prod/payment", 12) == 0);
    CHECK_RESULT(porin_compilation_endpoint_by_address(c1, S("10.0.1.99"), &name),
                 PORIN_RESULT_NOT_FOUND);
    CHECK_RESULT(porin_compilation_endpoint_by_address(c1, S("10.0.1"), &name),
                 PORIN_RESULT_INVALID_PARAMETER);
    CHECK_RESULT(porin_compilation_endpoint_by_address(c1, S("10.0.1.20"), NULL),
                 PORIN_RESULT_NULL_PARAMETER);
    CHECK_RESULT(porin_compilation_endpoint_by_address(NULL, S("10.0.1.20"), &name),
                 PORIN_RESULT_NULL_PARAMETER);
    CHECK_RESULT(porin_compilation_endpoint_identity(c1, S("prod/frontend"), &frontend_identity),
                 PORIN_RESULT_OK);
    CHECK(frontend_identity >= 256 && frontend_identity != identity);
    CHECK_RESULT(porin_compilation_endpoint_identity(c1, S("prod/nope"), &identity),
                 PORIN_RESULT_NOT_FOUND);
    CHECK_RESULT(porin_compilation_endpoint_identity(c1, INVALID_UTF8, 3, &identity),
                 PORIN_RESULT_INVALID_UTF8);
    CHECK_RESULT(porin_compilation_endpoint_identity(c1, NULL, 3, &identity),
                 PORIN_RESULT_NULL_PARAMETER);
    CHECK_RESULT(porin_compilation_endpoint_identity(c1, S("prod/payment"), NULL),
                 PORIN_RESULT_NULL_PARAMETER);

    /* Policy-map entries: payment allows frontend's identity on TCP/8080. */
    CHECK_RESULT(porin_compilation_policy_entries(c1, S("prod/payment"), &entries),
                 PORIN_RESULT_OK);
    CHECK(entries.count >= 1 && entries.key_size == 12 && entries.value_size == 12);
    {
        int found = 0;
        for (i = 0; i < entries.count; i++) {
            const uint8_t *k = entries.keys + i * entries.key_size;
            uint32_t prefixlen = (uint32_t)k[0] | (uint32_t)k[1] << 8 | (uint32_t)k[2] << 16 |
                                 (uint32_t)k[3] << 24;
            uint32_t id = (uint32_t)k[4] | (uint32_t)k[5] << 8 | (uint32_t)k[6] << 16 |
                          (uint32_t)k[7] << 24;
            if (prefixlen == 64 && id == frontend_identity && k[8] == 0 && k[9] == 6 &&
                k[10] == 0x1f && k[11] == 0x90)
                found = 1;
        }
        CHECK(found);
    }
    CHECK_RESULT(porin_compilation_policy_entries(c1, S("nope"), &entries),
                 PORIN_RESULT_NOT_FOUND);
    CHECK_RESULT(porin_compilation_policy_entries(c1, S("prod/payment"), NULL),
                 PORIN_RESULT_NULL_PARAMETER);
    CHECK_RESULT(porin_compilation_policy_entries(NULL, S("prod/payment"), &entries),
                 PORIN_RESULT_NULL_PARAMETER);

    /* ipcache: 10.0.1.20/32 -> payment, 0.0.0.0/0 -> 9, ::/0 -> 10. */
    CHECK_RESULT(porin_compilation_ipcache_entries(c1, 4, &entries), PORIN_RESULT_OK);
    CHECK(entries.count == 3 && entries.key_size == 8 && entries.value_size == 8);
    CHECK_RESULT(porin_compilation_ipcache_entries(c1, 6, &entries), PORIN_RESULT_OK);
    CHECK(entries.count == 2 && entries.key_size == 20);
    CHECK_RESULT(porin_compilation_ipcache_entries(c1, 5, &entries),
                 PORIN_RESULT_INVALID_PARAMETER);
    CHECK_RESULT(porin_compilation_ipcache_entries(c1, 4, NULL), PORIN_RESULT_NULL_PARAMETER);

    /* Decisions (reference evaluator). */
    CHECK(decide(c1, "prod/frontend", "prod/payment", 6, 8080) == PORIN_VERDICT_ALLOW);
    CHECK(decide(c1, "prod/frontend", "prod/payment", 6, 8081) == PORIN_VERDICT_DENY);
    CHECK(decide(c1, "10.0.1.10", "10.0.1.20", 6, 8080) == PORIN_VERDICT_ALLOW);
    CHECK(decide(c1, "world", "prod/payment", 6, 8080) == PORIN_VERDICT_DENY);
    CHECK_RESULT(porin_compilation_decide(c1, S("nobody/x"), S("prod/payment"), 6, 80, &decision),
                 PORIN_RESULT_UNKNOWN_PEER);
    CHECK_RESULT(porin_compilation_decide(c1, S("world"), S("prod/payment"), 6, 80, NULL),
                 PORIN_RESULT_NULL_PARAMETER);
    CHECK_RESULT(porin_compilation_decide(c1, INVALID_UTF8, 3, S("prod/payment"), 6, 80,
                                          &decision),
                 PORIN_RESULT_INVALID_UTF8);
    CHECK_RESULT(porin_compilation_decide(NULL, S("world"), S("prod/payment"), 6, 80, &decision),
                 PORIN_RESULT_NULL_PARAMETER);
    CHECK(porin_decision_verdict(NULL) == PORIN_VERDICT_DENY);
    CHECK_RESULT(porin_decision_explanation(NULL, &explanation), PORIN_RESULT_NULL_PARAMETER);
    CHECK_RESULT(porin_compilation_decide(c1, S("world"), S("prod/payment"), 6, 80, &decision),
                 PORIN_RESULT_OK);
    CHECK_RESULT(porin_decision_explanation(decision, NULL), PORIN_RESULT_NULL_PARAMETER);
    porin_decision_free(decision);
    porin_decision_free(decision); /* detected */
    CHECK(porin_decision_verdict(decision) == PORIN_VERDICT_DENY);
    porin_decision_free(NULL);

    /* Incremental: a new web endpoint; payment's map gains its identity. */
    CHECK_RESULT(porin_session_endpoint_add(session, S("prod"), S("canary"), web, 2, &canary_ip, 1),
                 PORIN_RESULT_OK);
    c2 = compile_ok(session);
    CHECK_RESULT(porin_session_compile_stats(session, &reused, &computed), PORIN_RESULT_OK);
    CHECK(reused + computed >= 2);
    CHECK(reused >= 1); /* frontend's state is reused */
    CHECK_RESULT(porin_compilation_endpoint_identity(c2, S("prod/frontend"), &identity),
                 PORIN_RESULT_OK);
    CHECK(identity == frontend_identity); /* identities are stable */
    CHECK(decide(c2, "prod/canary", "prod/payment", 6, 8080) == PORIN_VERDICT_ALLOW);
    CHECK(decide(c1, "10.0.1.30", "prod/payment", 6, 8080) == PORIN_VERDICT_DENY);

    CHECK_RESULT(porin_compilation_policy_diff(c1, c2, S("prod/payment"), &diff), PORIN_RESULT_OK);
    CHECK(porin_diff_count(diff) >= 1);
    for (i = 0; i < porin_diff_count(diff); i++) {
        CHECK_RESULT(porin_diff_get(diff, i, &change), PORIN_RESULT_OK);
        CHECK(change.key_size == 12);
        CHECK(change.kind == PORIN_CHANGE_KIND_DELETE ? change.value == NULL
                                                      : change.value_size == 12);
    }
    CHECK_RESULT(porin_diff_get(diff, porin_diff_count(diff), &change),
                 PORIN_RESULT_INVALID_PARAMETER);
    CHECK_RESULT(porin_diff_get(diff, 0, NULL), PORIN_RESULT_NULL_PARAMETER);
    CHECK_RESULT(porin_diff_get(NULL, 0, &change), PORIN_RESULT_NULL_PARAMETER);
    porin_diff_free(diff);
    porin_diff_free(diff); /* detected */
    CHECK(porin_diff_count(diff) == 0);
    CHECK(porin_diff_count(NULL) == 0);
    porin_diff_free(NULL);
    /* Same compilation: nothing to write. */
    CHECK_RESULT(porin_compilation_policy_diff(c1, c1, S("prod/payment"), &diff), PORIN_RESULT_OK);
    CHECK(porin_diff_count(diff) == 0);
    porin_diff_free(diff);
    CHECK_RESULT(porin_compilation_policy_diff(c1, c2, S("prod/nope"), &diff),
                 PORIN_RESULT_NOT_FOUND);
    CHECK_RESULT(porin_compilation_policy_diff(c1, NULL, S("prod/payment"), &diff),
                 PORIN_RESULT_NULL_PARAMETER);
    CHECK_RESULT(porin_compilation_policy_diff(c1, c2, S("prod/payment"), NULL),
                 PORIN_RESULT_NULL_PARAMETER);
    /* ipcache difference: the canary's address is added. */
    CHECK_RESULT(porin_compilation_ipcache_diff(c1, c2, 4, &diff), PORIN_RESULT_OK);
    CHECK(porin_diff_count(diff) == 1);
    CHECK_RESULT(porin_diff_get(diff, 0, &change), PORIN_RESULT_OK);
    CHECK(change.kind == PORIN_CHANGE_KIND_ADD && change.key_size == 8 && change.key[0] == 32 &&
          change.key[4] == 10 && change.key[7] == 30 && change.value_size == 8);
    porin_diff_free(diff);
    CHECK_RESULT(porin_compilation_ipcache_diff(c1, c2, 7, &diff), PORIN_RESULT_INVALID_PARAMETER);
    CHECK_RESULT(porin_compilation_ipcache_diff(NULL, c2, 4, &diff), PORIN_RESULT_NULL_PARAMETER);

    /* Connectivity difference: payment now admits the canary on TCP/8080,
     * named as users name it. */
    CHECK_RESULT(porin_compilation_connectivity_diff(c1, c2, &connectivity), PORIN_RESULT_OK);
    CHECK(porin_connectivity_diff_count(connectivity) == 1);
    CHECK_RESULT(porin_connectivity_diff_get(connectivity, 0, &moved), PORIN_RESULT_OK);
    CHECK(str_eq(moved.endpoint, "prod/payment"));
    CHECK(moved.direction == PORIN_DIRECTION_INGRESS);
    CHECK(str_eq(moved.peer, "prod/canary"));
    CHECK(str_eq(moved.now_allowed, "TCP/8080"));
    CHECK(moved.now_denied.len == 0);
    CHECK_RESULT(porin_connectivity_diff_get(connectivity, 1, &moved),
                 PORIN_RESULT_INVALID_PARAMETER);
    CHECK(str_eq(moved.peer, "prod/canary")); /* outputs only on success */
    CHECK_RESULT(porin_connectivity_diff_get(connectivity, 0, NULL), PORIN_RESULT_NULL_PARAMETER);
    CHECK_RESULT(porin_connectivity_diff_get(NULL, 0, &moved), PORIN_RESULT_NULL_PARAMETER);
    porin_connectivity_diff_free(connectivity);
    porin_connectivity_diff_free(connectivity); /* detected */
    CHECK(porin_connectivity_diff_count(connectivity) == 0);
    CHECK_RESULT(porin_connectivity_diff_get(connectivity, 0, &moved),
                 PORIN_RESULT_INVALID_HANDLE);
    CHECK(porin_connectivity_diff_count(NULL) == 0);
    porin_connectivity_diff_free(NULL);
    /* Back again: the same change, now denied. */
    CHECK_RESULT(porin_compilation_connectivity_diff(c2, c1, &connectivity), PORIN_RESULT_OK);
    CHECK(porin_connectivity_diff_count(connectivity) == 1);
    CHECK_RESULT(porin_connectivity_diff_get(connectivity, 0, &moved), PORIN_RESULT_OK);
    CHECK(str_eq(moved.now_denied, "TCP/8080") && moved.now_allowed.len == 0);
    porin_connectivity_diff_free(connectivity);
    /* Same compilation: no change. */
    CHECK_RESULT(porin_compilation_connectivity_diff(c1, c1, &connectivity), PORIN_RESULT_OK);
    CHECK(porin_connectivity_diff_count(connectivity) == 0);
    porin_connectivity_diff_free(connectivity);
    connectivity = NULL;
    CHECK_RESULT(porin_compilation_connectivity_diff(NULL, c2, &connectivity),
                 PORIN_RESULT_NULL_PARAMETER);
    CHECK_RESULT(porin_compilation_connectivity_diff(c1, NULL, &connectivity),
                 PORIN_RESULT_NULL_PARAMETER);
    CHECK_RESULT(porin_compilation_connectivity_diff(c1, c2, NULL), PORIN_RESULT_NULL_PARAMETER);
    CHECK(connectivity == NULL); /* outputs only on success */
    /* Wrong handle type: a map diff passed as a connectivity diff. */
    CHECK_RESULT(porin_compilation_ipcache_diff(c1, c2, 4, &diff), PORIN_RESULT_OK);
    CHECK(porin_connectivity_diff_count((const porin_connectivity_diff *)diff) == 0);
    CHECK_RESULT(porin_connectivity_diff_get((const porin_connectivity_diff *)diff, 0, &moved),
                 PORIN_RESULT_INVALID_HANDLE);
    porin_diff_free(diff);

    /* Labels change and removal; then a policy change. */
    CHECK_RESULT(porin_session_endpoint_set_labels(session, S("prod"), S("canary"), web, 1),
                 PORIN_RESULT_OK);
    CHECK_RESULT(porin_session_endpoint_remove(session, S("prod"), S("frontend")),
                 PORIN_RESULT_OK);
    CHECK_RESULT(porin_session_clear_policies(NULL), PORIN_RESULT_NULL_PARAMETER);
    CHECK_RESULT(porin_session_clear_policies(session), PORIN_RESULT_OK);
    CHECK_RESULT(porin_session_add_policy_bytes(session, S("policy-v2.yaml"),
                                                (const uint8_t *)POLICY_V2, sizeof POLICY_V2 - 1),
                 PORIN_RESULT_OK);
    c3 = compile_ok(session);
    CHECK(porin_compilation_endpoint_count(c3) == 2);
    CHECK(decide(c3, "prod/canary", "prod/payment", 6, 8080) == PORIN_VERDICT_DENY);
    CHECK_RESULT(porin_compilation_policy_diff(c2, c3, S("prod/frontend"), &diff),
                 PORIN_RESULT_OK); /* only in the old one: everything deleted */
    for (i = 0; i < porin_diff_count(diff); i++) {
        CHECK_RESULT(porin_diff_get(diff, i, &change), PORIN_RESULT_OK);
        if (change.kind != PORIN_CHANGE_KIND_DELETE)
            CHECK(change.value != NULL);
    }
    porin_diff_free(diff);

    /* A session freed before its compilations: they stay valid. */
    porin_session_free(session);
    CHECK(porin_compilation_endpoint_count(c2) == 3);
    /* Wrong handle type: a compilation passed as a session. */
    CHECK_RESULT(porin_session_compile_stats((const porin_session *)c1, &reused, &computed),
                 PORIN_RESULT_INVALID_HANDLE);
    porin_compilation_free(c1);
    porin_compilation_free(c1); /* detected */
    CHECK_RESULT(porin_compilation_object(c1, &object, &object_len), PORIN_RESULT_INVALID_HANDLE);
    porin_compilation_free(c2);
    porin_compilation_free(c3);
    porin_compilation_free(NULL);
}

/* Whether the `len` bytes at `hay` contain the NUL-terminated `needle`. */
static int contains(const char *hay, size_t len, const char *needle) {
    size_t n = strlen(needle), i;
    for (i = 0; n <= len && i <= len - n; i++)
        if (memcmp(hay + i, needle, n) == 0) return 1;
    return 0;
}

/* The session's last error contains every needle (NULL-terminated list). */
static void check_last_error(const porin_session *session, const char *const *needles) {
    const char *error = NULL;
    size_t error_len = 0;
    CHECK_RESULT(porin_session_last_error(session, &error, &error_len), PORIN_RESULT_OK);
    for (; *needles; needles++) {
        if (!contains(error, error_len, *needles)) {
            fprintf(stderr, "last error lacks `%s`: %.*s\n", *needles, (int)error_len, error);
            suite_failures++;
        }
    }
}

/* porin_session_set_limit / get_limit: misuse, a compile refused by a
 * low rule limit (LIMIT_EXCEEDED, a readable message, the previous
 * compilation valid and unchanged), raising it compiles again; an
 * inventory limit and a policy load limit. */
static void check_limits(void) {
    porin_session *session = new_session();
    porin_compilation *first = NULL, *refused = (porin_compilation *)0x1, *again = NULL;
    porin_diagnostics *diagnostics = NULL;
    const uint8_t *object = NULL;
    uint8_t *saved = NULL;
    size_t object_len = 0, saved_len = 0, i;
    uint64_t value = 77;
    porin_diagnostic d;
    int pm002 = 0;
    static const char *const rules_error[] = {
        "policy rules", "1 needed", "the limit is 0", "--max-rules", "PORIN_LIMIT_RULES", NULL};
    static const char *const inventory_error[] = {
        "inventory.yaml", "inventory file size", "the limit is `10`",
        "PORIN_LIMIT_INVENTORY_FILE_BYTES", NULL};
    static const char *const total_error[] = {"v2.yaml", "the limit is",
                                              "PORIN_LIMIT_POLICY_TOTAL_BYTES", NULL};

    /* Misuse. */
    CHECK_RESULT(porin_session_set_limit(NULL, PORIN_LIMIT_RULES, 1), PORIN_RESULT_NULL_PARAMETER);
    CHECK_RESULT(porin_session_set_limit(session, 0, 1), PORIN_RESULT_INVALID_PARAMETER);
    CHECK_RESULT(porin_session_set_limit(session, 9999, 1), PORIN_RESULT_INVALID_PARAMETER);
    CHECK_RESULT(porin_session_get_limit(NULL, PORIN_LIMIT_RULES, &value),
                 PORIN_RESULT_NULL_PARAMETER);
    CHECK_RESULT(porin_session_get_limit(session, PORIN_LIMIT_RULES, NULL),
                 PORIN_RESULT_NULL_PARAMETER);
    CHECK_RESULT(porin_session_get_limit(session, 12345, &value), PORIN_RESULT_INVALID_PARAMETER);
    CHECK(value == 77); /* outputs only on success */
    /* Defaults are the library's (SECURITY.md). */
    CHECK_RESULT(porin_session_get_limit(session, PORIN_LIMIT_RULES, &value), PORIN_RESULT_OK);
    CHECK(value == 100000);
    CHECK_RESULT(porin_session_get_limit(session, PORIN_LIMIT_POLICY_FILE_BYTES, &value),
                 PORIN_RESULT_OK);
    CHECK(value == 8u * 1024 * 1024);

    CHECK_RESULT(porin_session_add_policy_bytes(session, S("policy.yaml"),
                                                (const uint8_t *)POLICY, sizeof POLICY - 1),
                 PORIN_RESULT_OK);
    CHECK_RESULT(porin_session_add_inventory_bytes(session, S("inventory.yaml"),
                                                   (const uint8_t *)INVENTORY,
                                                   sizeof INVENTORY - 1),
                 PORIN_RESULT_OK);
    first = compile_ok(session);
    CHECK_RESULT(porin_compilation_object(first, &object, &object_len), PORIN_RESULT_OK);
    saved = malloc(object_len);
    CHECK(saved != NULL);
    if (saved) memcpy(saved, object, object_len);
    saved_len = object_len;

    /* A rule limit below the policy's one rule: refused, nothing written. */
    CHECK_RESULT(porin_session_set_limit(session, PORIN_LIMIT_RULES, 0), PORIN_RESULT_OK);
    CHECK_RESULT(porin_session_get_limit(session, PORIN_LIMIT_RULES, &value), PORIN_RESULT_OK);
    CHECK(value == 0);
    CHECK_RESULT(porin_session_compile(session, &refused, NULL), PORIN_RESULT_LIMIT_EXCEEDED);
    CHECK(refused == (porin_compilation *)0x1);
    check_last_error(session, rules_error);
    /* The earlier compilation is untouched. */
    CHECK_RESULT(porin_compilation_object(first, &object, &object_len), PORIN_RESULT_OK);
    CHECK(saved != NULL && object_len == saved_len && memcmp(object, saved, saved_len) == 0);
    CHECK(decide(first, "prod/frontend", "prod/payment", 6, 8080) == PORIN_VERDICT_ALLOW);

    /* Raised: compiles again, to the same object. */
    CHECK_RESULT(porin_session_set_limit(session, PORIN_LIMIT_RULES, 10), PORIN_RESULT_OK);
    again = compile_ok(session);
    CHECK_RESULT(porin_compilation_object(again, &object, &object_len), PORIN_RESULT_OK);
    CHECK(saved != NULL && object_len == saved_len && memcmp(object, saved, saved_len) == 0);

    /* An inventory limit: refused when added, the session unchanged. */
    CHECK_RESULT(porin_session_set_limit(session, PORIN_LIMIT_INVENTORY_FILE_BYTES, 10),
                 PORIN_RESULT_OK);
    CHECK_RESULT(porin_session_add_inventory_bytes(session, S("inventory.yaml"),
                                                   (const uint8_t *)INVENTORY,
                                                   sizeof INVENTORY - 1),
                 PORIN_RESULT_LIMIT_EXCEEDED);
    check_last_error(session, inventory_error);
    porin_compilation_free(again);
    again = compile_ok(session);

    /* A policy load limit: reported as a PM002 finding of the compile. */
    CHECK_RESULT(porin_session_set_limit(session, PORIN_LIMIT_POLICY_FILE_BYTES, 10),
                 PORIN_RESULT_OK);
    CHECK_RESULT(porin_session_add_policy_bytes(session, S("more.yaml"),
                                                (const uint8_t *)POLICY_V2, sizeof POLICY_V2 - 1),
                 PORIN_RESULT_OK);
    CHECK_RESULT(porin_session_compile(session, &refused, &diagnostics),
                 PORIN_RESULT_POLICY_INVALID);
    CHECK(diagnostics != NULL);
    for (i = 0; diagnostics && i < porin_diagnostics_count(diagnostics); i++) {
        CHECK_RESULT(porin_diagnostics_get(diagnostics, i, &d), PORIN_RESULT_OK);
        if (d.code.len == 5 && memcmp(d.code.ptr, "PM002", 5) == 0 &&
            contains(d.message.ptr, d.message.len, "--max-file-bytes"))
            pm002 = 1;
    }
    CHECK(pm002);
    porin_diagnostics_free(diagnostics);

    free(saved);
    porin_compilation_free(first);
    porin_compilation_free(again);
    porin_session_free(session);

    /* The total of a session's policy texts: refused once over, nothing
     * added; clearing the policies starts the count again. */
    session = new_session();
    CHECK_RESULT(porin_session_set_limit(session, PORIN_LIMIT_POLICY_TOTAL_BYTES,
                                         sizeof POLICY + 10),
                 PORIN_RESULT_OK);
    CHECK_RESULT(porin_session_add_policy_bytes(session, S("policy.yaml"),
                                                (const uint8_t *)POLICY, sizeof POLICY - 1),
                 PORIN_RESULT_OK);
    CHECK_RESULT(porin_session_add_policy_bytes(session, S("v2.yaml"),
                                                (const uint8_t *)POLICY_V2, sizeof POLICY_V2 - 1),
                 PORIN_RESULT_POLICY_TOO_LARGE);
    check_last_error(session, total_error);
    CHECK_RESULT(porin_session_clear_policies(session), PORIN_RESULT_OK);
    CHECK_RESULT(porin_session_add_policy_bytes(session, S("v2.yaml"),
                                                (const uint8_t *)POLICY_V2, sizeof POLICY_V2 - 1),
                 PORIN_RESULT_OK);
    porin_session_free(session);
}


/* The live session (porin_session_apply_*): each change gives the writes
 * of every endpoint it touches; a one-rule change and a new or removed pod
 * identity are applied incrementally; the batch edit functions refuse a
 * live session. */
static const porin_endpoint_delta *find_delta(const porin_update *update, const char *name,
                                              porin_endpoint_delta *out) {
    size_t i, n = porin_update_count(update);
    for (i = 0; i < n; i++) {
        CHECK_RESULT(porin_update_get(update, i, out), PORIN_RESULT_OK);
        if (str_eq(out->endpoint, name)) return out;
    }
    return NULL;
}

static int is_incremental(const porin_update *update) {
    bool incremental = false;
    porin_str reason = {NULL, 0};
    CHECK_RESULT(porin_update_path(update, &incremental, &reason), PORIN_RESULT_OK);
    CHECK(incremental == (reason.len == 0));
    return incremental;
}

static void check_live_session(void) {
    porin_session *session = new_session();
    porin_update *update = NULL;
    porin_endpoint_delta delta;
    porin_diff *diff = NULL;
    porin_compilation *compilation = NULL;
    porin_label payment[] = {{{S("app")}, {S("payment")}}};
    porin_label web[] = {{{S("tier")}, {S("web")}}, {{S("pod")}, {S("web-1")}}};
    porin_str payment_ip[] = {{S("10.0.1.20")}};
    porin_str web_ip[] = {{S("10.0.1.30")}};

    /* The first endpoint (the session becomes live). */
    CHECK_RESULT(porin_session_apply_endpoint_add(session, S("prod"), S("payment"), payment, 1,
                                                  payment_ip, 1, &update),
                 PORIN_RESULT_OK);
    CHECK(find_delta(update, "prod/payment", &delta) != NULL && delta.added && !delta.removed);
    porin_update_free(update);
    /* The batch edit functions refuse a live session. */
    CHECK_RESULT(porin_session_add_policy_bytes(session, S("p"), (const uint8_t *)POLICY,
                                                strlen(POLICY)),
                 PORIN_RESULT_INVALID_PARAMETER);
    CHECK_RESULT(porin_session_endpoint_remove(session, S("prod"), S("payment")),
                 PORIN_RESULT_INVALID_PARAMETER);

    /* A new text: payment's map changes. */
    CHECK_RESULT(porin_session_apply_policy_bytes(session, S("payment.yaml"),
                                                  (const uint8_t *)POLICY, strlen(POLICY),
                                                  &update),
                 PORIN_RESULT_OK);
    CHECK(find_delta(update, "prod/payment", &delta) != NULL && !delta.added && delta.writes > 0);
    porin_update_free(update);

    /* A pod with new labels that payment's peer selector matches:
     * incremental, payment gains its keys, the pod's own map is added. */
    CHECK_RESULT(porin_session_apply_endpoint_add(session, S("prod"), S("web-1"), web, 2, web_ip,
                                                  1, &update),
                 PORIN_RESULT_OK);
    CHECK(is_incremental(update));
    CHECK(find_delta(update, "prod/web-1", &delta) != NULL && delta.added);
    CHECK(find_delta(update, "prod/payment", &delta) != NULL && !delta.added && delta.writes > 0);
    CHECK_RESULT(porin_update_diff(update, 1, &diff), PORIN_RESULT_OK);
    CHECK(diff != NULL);
    porin_diff_free(diff);
    CHECK_RESULT(porin_update_diff(update, porin_update_count(update), &diff),
                 PORIN_RESULT_INVALID_PARAMETER);
    CHECK_RESULT(porin_update_get(update, porin_update_count(update), &delta),
                 PORIN_RESULT_INVALID_PARAMETER);
    CHECK_RESULT(porin_update_get(update, 0, NULL), PORIN_RESULT_NULL_PARAMETER);
    porin_update_free(update);

    /* A text of CIDR groups: recompiled in full (a group's labels reach
     * every text's CIDR identities); the policy's changes below stay
     * incremental beside it. */
    CHECK_RESULT(porin_session_apply_policy_bytes(session, S("groups.yaml"),
                                                  (const uint8_t *)GROUPS, strlen(GROUPS),
                                                  &update),
                 PORIN_RESULT_OK);
    CHECK(!is_incremental(update));
    porin_update_free(update);

    /* A one-rule change (port 8080 -> 9090): incremental, fence then
     * settle for the old and the new key. */
    CHECK_RESULT(porin_session_apply_policy_bytes(session, S("payment.yaml"),
                                                  (const uint8_t *)POLICY_V2, strlen(POLICY_V2),
                                                  &update),
                 PORIN_RESULT_OK);
    CHECK(is_incremental(update));
    CHECK(porin_update_count(update) == 1);
    CHECK(find_delta(update, "prod/payment", &delta) != NULL && delta.writes == 4);
    CHECK_RESULT(porin_update_diff(update, 0, &diff), PORIN_RESULT_OK);
    CHECK(porin_diff_count(diff) == delta.writes);
    porin_diff_free(diff);
    porin_update_free(update);

    /* A bad text changes nothing. */
    update = NULL;
    CHECK_RESULT(porin_session_apply_policy_bytes(session, S("bad.yaml"),
                                                  (const uint8_t *)BAD_POLICY, strlen(BAD_POLICY),
                                                  &update),
                 PORIN_RESULT_POLICY_INVALID);
    CHECK(update == NULL);

    /* compile gives the live state. */
    CHECK_RESULT(porin_session_compile(session, &compilation, NULL), PORIN_RESULT_OK);
    CHECK(porin_compilation_endpoint_count(compilation) == 2);
    porin_compilation_free(compilation);

    /* The pod goes: payment loses its keys. */
    CHECK_RESULT(porin_session_apply_endpoint_remove(session, S("prod"), S("web-1"), &update),
                 PORIN_RESULT_OK);
    CHECK(is_incremental(update));
    CHECK(find_delta(update, "prod/web-1", &delta) != NULL && delta.removed && delta.writes == 0);
    CHECK(find_delta(update, "prod/payment", &delta) != NULL && delta.writes > 0);
    porin_update_free(update);
    CHECK_RESULT(porin_session_apply_endpoint_remove(session, S("prod"), S("web-1"), &update),
                 PORIN_RESULT_NOT_FOUND);
    CHECK_RESULT(porin_session_apply_policy_remove(session, S("nope"), &update),
                 PORIN_RESULT_NOT_FOUND);
    CHECK_RESULT(porin_session_apply_policy_remove(session, S("payment.yaml"), &update),
                 PORIN_RESULT_OK);
    CHECK(find_delta(update, "prod/payment", &delta) != NULL && delta.writes > 0);
    porin_update_free(update);
    CHECK_RESULT(porin_session_apply_policy_remove(session, S("payment.yaml"), NULL),
                 PORIN_RESULT_NULL_PARAMETER);
    CHECK(porin_update_count(NULL) == 0);
    porin_update_free(NULL);
    porin_session_free(session);
}

/* porin_session_set_setting: Cilium agent settings by flag name
 * (docs/policy-tests.md#settings). With enable-node-selector-labels a
 * fromNodes rule selects the other node (Cilium's customnodes.yaml
 * example); unknown flags, bad values and values porin does not model are
 * refused with a message, the session unchanged; the local node's host
 * endpoint is node/NAME. */
static void check_settings(void) {
    static const char nodes_inventory[] =
        "kind: Inventory\n"
        "nodes:\n"
        "  - {name: n1, local: true, labels: {role: worker}, addresses: [192.168.80.1]}\n"
        "  - {name: n2, labels: {role: control-plane}, addresses: [192.168.80.2]}\n"
        "endpoints:\n"
        "  - {name: web, namespace: default, labels: {app: web}, ips: [10.0.80.1]}\n";
    static const char nodes_policy[] =
        "apiVersion: cilium.io/v2\n"
        "kind: CiliumNetworkPolicy\n"
        "metadata: {name: web, namespace: default}\n"
        "spec:\n"
        "  endpointSelector: {matchLabels: {app: web}}\n"
        "  ingress:\n"
        "    - fromNodes: [{matchLabels: {role: control-plane}}]\n";
    static const char *const unknown_error[] = {"no-such-flag", "enable-node-selector-labels",
                                                NULL};
    static const char *const refused_error[] = {"policy-cidr-match-mode", "pods", NULL};
    porin_session *session = new_session();
    porin_compilation *off = NULL, *on = NULL;

    CHECK_RESULT(porin_session_set_setting(NULL, S("allow-localhost"), S("policy")),
                 PORIN_RESULT_NULL_PARAMETER);
    CHECK_RESULT(porin_session_set_setting(session, S("no-such-flag"), S("true")),
                 PORIN_RESULT_INVALID_PARAMETER);
    check_last_error(session, unknown_error);
    /* A value porin does not model (Cilium 1.19 knows only `nodes`). */
    CHECK_RESULT(porin_session_set_setting(session, S("policy-cidr-match-mode"), S("pods")),
                 PORIN_RESULT_INVALID_PARAMETER);
    check_last_error(session, refused_error);
    CHECK_RESULT(porin_session_set_setting(session, S("allow-localhost"), S("sometimes")),
                 PORIN_RESULT_INVALID_PARAMETER);

    CHECK_RESULT(porin_session_add_policy_bytes(session, S("policy.yaml"),
                                                (const uint8_t *)nodes_policy,
                                                sizeof nodes_policy - 1),
                 PORIN_RESULT_OK);
    CHECK_RESULT(porin_session_add_inventory_bytes(session, S("inventory.yaml"),
                                                   (const uint8_t *)nodes_inventory,
                                                   sizeof nodes_inventory - 1),
                 PORIN_RESULT_OK);
    off = compile_ok(session);
    CHECK(decide(off, "node/n2", "default/web", 6, 80) == PORIN_VERDICT_DENY);
    CHECK_RESULT(porin_session_set_setting(session, S("enable-node-selector-labels"), S("true")),
                 PORIN_RESULT_OK);
    /* Without it the host (node/n1) always reaches the pod (Kubernetes
     * mode); fromNodes never selects the local host. */
    CHECK_RESULT(porin_session_set_setting(session, S("allow-localhost"), S("policy")),
                 PORIN_RESULT_OK);
    on = compile_ok(session);
    CHECK(decide(on, "node/n2", "default/web", 6, 80) == PORIN_VERDICT_ALLOW);
    CHECK(decide(on, "node/n1", "default/web", 6, 80) == PORIN_VERDICT_DENY);
    /* The host endpoint of the local node, not enforced: the host reaches
     * the world. */
    CHECK(decide(on, "node/n1", "world", 6, 443) == PORIN_VERDICT_ALLOW);
    porin_compilation_free(off);
    porin_compilation_free(on);
    porin_session_free(session);
}

/* The ClusterNetworkPolicy of check_cluster_network_policy. */
static const char CLUSTER_POLICY[] =
    "apiVersion: policy.networking.k8s.io/v1alpha2\n"
    "kind: ClusterNetworkPolicy\n"
    "metadata: {name: deny-slytherin}\n"
    "spec:\n"
    "  tier: Admin\n"
    "  priority: 10\n"
    "  subject:\n"
    "    namespaces: {matchLabels: {house: gryffindor}}\n"
    "  ingress:\n"
    "    - name: deny-from-slytherin\n"
    "      action: Deny\n"
    "      from: [{namespaces: {matchLabels: {house: slytherin}}}]\n";

/* A session holding CLUSTER_POLICY and the inventory text `inventory`. */
static porin_session *cluster_policy_session(const char *inventory) {
    porin_session *session = new_session();
    CHECK_RESULT(porin_session_add_policy_bytes(session, S("cnp.yaml"),
                                                (const uint8_t *)CLUSTER_POLICY,
                                                sizeof CLUSTER_POLICY - 1),
                 PORIN_RESULT_OK);
    CHECK_RESULT(porin_session_add_inventory_bytes(session, S("inventory.yaml"),
                                                   (const uint8_t *)inventory, strlen(inventory)),
                 PORIN_RESULT_OK);
    return session;
}

/* A ClusterNetworkPolicy through the C API (issue 21): Cilium 1.20
 * compiles it behind --enable-k8s-cluster-network-policy
 * (pkg/k8s/cluster_network_policy.go), 1.19 does not know it. The target
 * comes from porin_session_set_cilium_version and the switch of
 * porin_session_set_setting, or from the inventory text's ciliumVersion /
 * enableK8sClusterNetworkPolicy; the setters win over the inventory. The
 * policy: network-policy-api's conformance case "Should Deny traffic from
 * slytherin to gryffindor respecting ANP" as a v1alpha2 Admin Deny. */
static void check_cluster_network_policy(void) {
#define HOGWARTS                                                                  \
    "namespaces:\n"                                                               \
    "  gryffindor: {house: gryffindor}\n"                                         \
    "  slytherin: {house: slytherin}\n"                                           \
    "endpoints:\n"                                                                \
    "  - {name: harry-potter-0, namespace: gryffindor, labels: {app: harry-potter}}\n" \
    "  - {name: draco-malfoy-0, namespace: slytherin, labels: {app: draco-malfoy}}\n"
    static const char bare_inventory[] = "kind: Inventory\n" HOGWARTS;
    static const char targeted_inventory[] = "kind: Inventory\n"
                                             "ciliumVersion: \"1.20\"\n"
                                             "enableK8sClusterNetworkPolicy: true\n" HOGWARTS;
#undef HOGWARTS
    static const char *const not_in_1_19[] = {"ClusterNetworkPolicy", "deny-slytherin",
                                              "Cilium 1.19 does not implement it", NULL};
    static const char *const needs_switch[] = {"deny-slytherin",
                                               "--enable-k8s-cluster-network-policy", NULL};
    static const char *const bad_version[] = {"`1.18`", "1.19, 1.20", NULL};
    static const char *const bad_switch[] = {"enable-k8s-cluster-network-policy", "`yes`", NULL};
    porin_session *session = cluster_policy_session(bare_inventory);
    porin_compilation *compilation = NULL;
    porin_decision *decision = NULL;
    porin_str explanation;

    /* The default target (1.19): refused, naming the policy. */
    CHECK_RESULT(porin_session_compile(session, &compilation, NULL), PORIN_RESULT_POLICY_INVALID);
    check_last_error(session, not_in_1_19);
    /* Versions and switch values porin does not take: refused, named. */
    CHECK_RESULT(porin_session_set_cilium_version(NULL, S("1.20")), PORIN_RESULT_NULL_PARAMETER);
    CHECK_RESULT(porin_session_set_cilium_version(session, S("1.18")),
                 PORIN_RESULT_INVALID_PARAMETER);
    check_last_error(session, bad_version);
    CHECK_RESULT(porin_session_set_setting(session, S("enable-k8s-cluster-network-policy"),
                                           S("yes")),
                 PORIN_RESULT_INVALID_PARAMETER);
    check_last_error(session, bad_switch);
    /* 1.20 without the switch: still refused, naming the flag. */
    CHECK_RESULT(porin_session_set_cilium_version(session, S("1.20")), PORIN_RESULT_OK);
    CHECK_RESULT(porin_session_compile(session, &compilation, NULL), PORIN_RESULT_POLICY_INVALID);
    check_last_error(session, needs_switch);
    /* 1.20 with the switch: the Admin Deny decides, and says so. */
    CHECK_RESULT(porin_session_set_setting(session, S("enable-k8s-cluster-network-policy"),
                                           S("true")),
                 PORIN_RESULT_OK);
    compilation = compile_ok(session);
    CHECK(decide(compilation, "slytherin/draco-malfoy-0", "gryffindor/harry-potter-0", 6, 80) ==
          PORIN_VERDICT_DENY);
    /* No default deny: the subject's other peers and egress stay open. */
    CHECK(decide(compilation, "gryffindor/harry-potter-0", "slytherin/draco-malfoy-0", 6, 80) ==
          PORIN_VERDICT_ALLOW);
    CHECK_RESULT(porin_compilation_decide(compilation, S("slytherin/draco-malfoy-0"),
                                          S("gryffindor/harry-potter-0"), 6, 80, &decision),
                 PORIN_RESULT_OK);
    CHECK_RESULT(porin_decision_explanation(decision, &explanation), PORIN_RESULT_OK);
    CHECK(contains(explanation.ptr, explanation.len, "tier Admin, priority 10"));
    CHECK(contains(explanation.ptr, explanation.len, "deny-from-slytherin"));
    porin_decision_free(decision);
    porin_compilation_free(compilation);
    /* The switch turned off again: refused. */
    CHECK_RESULT(porin_session_set_setting(session, S("enable-k8s-cluster-network-policy"),
                                           S("false")),
                 PORIN_RESULT_OK);
    CHECK_RESULT(porin_session_compile(session, &compilation, NULL), PORIN_RESULT_POLICY_INVALID);
    porin_session_free(session);

    /* The inventory text says 1.20 with the switch: compiled without a
     * setter; porin_session_set_cilium_version("1.19") overrides it. */
    session = cluster_policy_session(targeted_inventory);
    compilation = compile_ok(session);
    CHECK(decide(compilation, "slytherin/draco-malfoy-0", "gryffindor/harry-potter-0", 6, 80) ==
          PORIN_VERDICT_DENY);
    porin_compilation_free(compilation);
    CHECK_RESULT(porin_session_set_cilium_version(session, S("1.19")), PORIN_RESULT_OK);
    CHECK_RESULT(porin_session_compile(session, &compilation, NULL), PORIN_RESULT_POLICY_INVALID);
    check_last_error(session, not_in_1_19);
    porin_session_free(session);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s FIXTURES_DIR\n", argv[0]);
        return 2;
    }
    CHECK(second_tu_checks() == 0);
    check_result_messages();
    check_session_misuse(argv[1]);
    check_failing_policy();
    check_duplicate_policy();
    check_compilation();
    check_limits();
    check_settings();
    check_cluster_network_policy();
    check_live_session();
    if (suite_failures) {
        fprintf(stderr, "%d check(s) failed\n", suite_failures);
        return 1;
    }
    printf("porin C suite: all checks passed\n");
    return 0;
}
