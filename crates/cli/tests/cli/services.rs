//! Services as destinations (issue 17), on Online Boutique's release
//! manifests (`examples/boutique`: a Deployment and a Service per
//! microservice): `porin query --to svc/NAMESPACE/NAME --port P` resolves
//! the Service port to its targetPort (numeric, or a named container port)
//! and its backing pods and answers for each backend, naming it; a test
//! case may name a Service (`fixtures/policy-tests/services/`, which also
//! runs on the kernel engine in porin-kernel's fixtures_both_engines); an
//! unknown Service or port is an error naming what the inventory has,
//! never an allow.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests panic on broken fixtures"
)]

use std::process::Output;

use crate::common::porin;

const POLICIES: &str = "examples/boutique/policies";
const INVENTORY: &str = "examples/boutique/manifests.yaml";
const FIXTURE: &str = "fixtures/policy-tests/services/boutique-services.yaml";

fn stdout(out: &Output) -> String {
    String::from_utf8(out.stdout.clone()).unwrap()
}

fn stderr(out: &Output) -> String {
    String::from_utf8(out.stderr.clone()).unwrap()
}

fn query_service(from: &str, service: &str, port: &str) -> Output {
    porin(&[
        "query",
        "--from",
        from,
        "--to",
        service,
        "--port",
        port,
        "--inventory",
        INVENTORY,
        POLICIES,
    ])
}

#[test]
fn query_answers_for_the_backend_on_its_target_port() {
    // emailservice: Service port 5000 -> targetPort 8080.
    let allowed = query_service(
        "default/checkoutservice",
        "svc/default/emailservice",
        "5000",
    );
    assert_eq!(allowed.status.code(), Some(0), "{}", stderr(&allowed));
    let text = stdout(&allowed);
    assert!(
        text.starts_with("allow: default/checkoutservice -> svc/default/emailservice TCP/5000 (targetPort 8080, 1 backend)"),
        "{text}"
    );
    assert!(
        text.contains("backend default/emailservice TCP/8080: allow"),
        "{text}"
    );
    insta::assert_snapshot!("services_query_allowed", text);
    // The front end is denied, and the default-deny explanation names the
    // policies that put each side in default deny.
    let denied = query_service("default/frontend", "svc/default/emailservice", "5000");
    assert_eq!(denied.status.code(), Some(1));
    let text = stdout(&denied);
    assert!(
        text.contains("default deny, set by NetworkPolicy default/emailservice"),
        "{text}"
    );
    insta::assert_snapshot!("services_query_denied", text);
}

#[test]
fn query_of_a_test_file_resolves_a_named_target_port_per_pod() {
    let out = porin(&[
        "query",
        "--from",
        "default/checkoutservice",
        "--to",
        "svc/default/mailer",
        "--port",
        "25",
        FIXTURE,
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("(targetPort smtp, 1 backend)"), "{text}");
    assert!(
        text.contains("backend default/mailer TCP/2525: allow"),
        "{text}"
    );
    insta::assert_snapshot!("services_query_named_target_port", text);
}

#[test]
fn an_unknown_service_or_port_is_an_error_not_an_allow() {
    let unknown = query_service("default/frontend", "svc/default/mail", "5000");
    assert_eq!(unknown.status.code(), Some(2));
    let error = stderr(&unknown);
    assert!(error.contains("unknown Service `default/mail`"), "{error}");
    assert!(error.contains("default/emailservice"), "{error}");
    assert!(stdout(&unknown).is_empty());
    // 8080 is the pod port, not a port of the Service.
    let port = query_service("default/frontend", "svc/default/emailservice", "8080");
    assert_eq!(port.status.code(), Some(2));
    let error = stderr(&port);
    assert!(
        error.contains(
            "Service `default/emailservice` (examples/boutique/manifests.yaml:253) has no port 8080/TCP: its ports: grpc 5000/TCP -> 8080"
        ),
        "{error}"
    );
    // A Service is no source.
    let from = porin(&[
        "query",
        "--from",
        "svc/default/frontend",
        "--to",
        "default/cartservice",
        "--port",
        "7070",
        "--inventory",
        INVENTORY,
        POLICIES,
    ]);
    assert_eq!(from.status.code(), Some(2));
    assert!(stderr(&from).contains("a Service is a destination only"));
}

#[test]
fn test_cases_name_services_and_each_backend_is_a_line() {
    let out = porin(&["test", FIXTURE]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    let text = stdout(&out);
    assert!(text.contains("-> svc/default/emailservice TCP/5000 via backend default/emailservice TCP/8080 (targetPort 8080) => allow"), "{text}");
    assert!(text.ends_with("9 passed, 0 failed\n"), "{text}");
    insta::assert_snapshot!("services_test_fixture", text);
}

#[test]
fn a_case_naming_an_unknown_service_rejects_the_file_at_its_line() {
    let dir = std::env::temp_dir().join(format!("porin-services-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("unknown.yaml");
    let inventory = crate::common::workspace().join(INVENTORY);
    std::fs::write(
        &file,
        format!(
            "kind: PolicyTest\ninventory: [{}]\npolicies:\n  - path: {}\ncases:\n  - {{from: default/frontend, to: svc/default/cartservice, port: 7070, expect: allow}}\n  - {{from: default/frontend, to: svc/default/carts, port: 7070, expect: allow}}\n",
            inventory.display(),
            crate::common::workspace()
                .join("examples/boutique/policies/default-deny.yaml")
                .display()
        ),
    )
    .unwrap();
    let out = porin(&["test", file.to_str().unwrap()]);
    let text = format!("{}{}", stdout(&out), stderr(&out));
    assert_eq!(out.status.code(), Some(2), "{text}");
    assert!(
        text.contains(":7: cases[1]: unknown Service `default/carts`"),
        "{text}"
    );
    assert!(text.contains("1 file rejected"), "{text}");
    assert!(!text.contains("PASS"), "{text}");
    let _ = std::fs::remove_dir_all(&dir);
}
