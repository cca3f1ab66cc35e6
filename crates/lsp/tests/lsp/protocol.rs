//! The protocol, message by message: initialize, diagnostics on open and on
//! change, hover, completion, code actions, the set mode with an
//! inventory, and malformed messages.

use serde_json::{Value, json};

use porin_lsp::Options;

use crate::common::{Client, file_uri, places, scratch, workspace_root};

/// An invalid policy; `porin lint` reports (1-based line:column)
/// PM003 at 11:5 (`fromEndpoint`), PM004 at 16:15 (`8080`) and PM023 at
/// 17:19 (`tcp`).
pub const INVALID: &str = include_str!("../../../../fixtures/editors/invalid-web.yaml");

fn start(name: &str) -> (Client, std::path::PathBuf, String) {
    let dir = scratch(name);
    let file = dir.join("web.yaml");
    std::fs::write(&file, INVALID).unwrap();
    let mut client = Client::start(Options::default());
    let result = client.initialize(&dir, Value::Null);
    let capabilities = &result["result"]["capabilities"];
    assert_eq!(capabilities["hoverProvider"], true, "{result}");
    assert_eq!(capabilities["textDocumentSync"]["change"], 1);
    assert_eq!(capabilities["positionEncoding"], "utf-16");
    let uri = file_uri(&file);
    (client, file, uri)
}

#[test]
fn diagnostics_have_porin_lints_codes_places_and_messages() {
    let (mut client, _, uri) = start("diagnostics");
    client.open(&uri, INVALID);
    let diagnostics = client.diagnostics(&uri);
    assert_eq!(
        places(&diagnostics),
        [
            (10, 4, 16, "PM003".to_owned()),
            (15, 14, 18, "PM004".to_owned()),
            (16, 18, 21, "PM023".to_owned()),
        ]
    );
    let pm004 = diagnostics.iter().find(|d| d["code"] == "PM004").unwrap();
    assert_eq!(pm004["severity"], 1);
    assert_eq!(pm004["source"], "porin");
    assert_eq!(
        pm004["message"],
        "expected a string, found integer `8080`\nhelp: the field is a string; quote the value: \"8080\""
    );

    // A change is linted again: fix the port, and PM004 goes away.
    let fixed = INVALID.replace("port: 8080", "port: \"8080\"");
    client.notify(
        "textDocument/didChange",
        json!({"textDocument": {"uri": uri, "version": 2}, "contentChanges": [{"text": fixed}]}),
    );
    let diagnostics = client.diagnostics(&uri);
    let codes: Vec<&str> = diagnostics
        .iter()
        .filter_map(|d| d["code"].as_str())
        .collect();
    assert_eq!(codes, ["PM003", "PM023"]);
    // A change that changes no finding publishes nothing.
    client.notifications.clear();
    client.notify(
        "textDocument/didChange",
        json!({"textDocument": {"uri": uri, "version": 3}, "contentChanges": [{"text": format!("{fixed}# a comment\n")}]}),
    );
    let hover = client.request(
        "textDocument/hover",
        json!({"textDocument": {"uri": uri}, "position": {"line": 0, "character": 0}}),
    );
    assert!(hover.get("error").is_none(), "{hover}");
    assert!(
        !client
            .notifications
            .iter()
            .any(|n| n["method"] == "textDocument/publishDiagnostics"),
        "{:?}",
        client.notifications
    );
    // Closing clears them.
    client.notify(
        "textDocument/didClose",
        json!({"textDocument": {"uri": uri}}),
    );
    assert_eq!(client.diagnostics(&uri), Vec::<Value>::new());
    assert!(client.stop());
}

#[test]
fn hover_shows_the_models_field_docs_and_porin_explain() {
    let (mut client, _, uri) = start("hover");
    client.open(&uri, INVALID);
    client.diagnostics(&uri);
    // On the key `protocol` (line 17, column 9): the model's description.
    let hover = client.request(
        "textDocument/hover",
        json!({"textDocument": {"uri": uri}, "position": {"line": 16, "character": 10}}),
    );
    let text = hover["result"]["contents"]["value"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let schema = porin_model::schema::policy_schema();
    let described = schema
        .pointer("/definitions/PortProtocol/properties/protocol/description")
        .and_then(Value::as_str)
        .unwrap();
    assert!(text.starts_with("**protocol**: `L4Proto`"), "{text}");
    assert!(text.contains(described), "{text}");
    // On the finding's token: `porin explain PM023`.
    let hover = client.request(
        "textDocument/hover",
        json!({"textDocument": {"uri": uri}, "position": {"line": 16, "character": 19}}),
    );
    let text = hover["result"]["contents"]["value"]
        .as_str()
        .unwrap_or_default();
    let explain = porin_lint::codes::find("PM023").unwrap().document();
    assert!(text.contains(explain.lines().next().unwrap()), "{text}");
    // A code written in an annotation explains itself.
    let annotated = format!(
        "{}\n",
        INVALID.replace(
            "  namespace: default",
            "  namespace: default\n  annotations:\n    porin.dev/ignore: PR005"
        )
    );
    client.notify(
        "textDocument/didChange",
        json!({"textDocument": {"uri": uri, "version": 2}, "contentChanges": [{"text": annotated}]}),
    );
    let hover = client.request(
        "textDocument/hover",
        json!({"textDocument": {"uri": uri}, "position": {"line": 6, "character": 24}}),
    );
    let text = hover["result"]["contents"]["value"]
        .as_str()
        .unwrap_or_default();
    assert!(text.contains("PR005 redundant-allow"), "{text}");
    assert!(client.stop());
}

/// The labels offered at (line, character).
fn completions(client: &mut Client, uri: &str, line: u32, character: u32) -> Vec<String> {
    let response = client.request(
        "textDocument/completion",
        json!({"textDocument": {"uri": uri}, "position": {"line": line, "character": character}}),
    );
    response["result"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|i| i["label"].as_str().map(str::to_owned))
        .collect()
}

#[test]
fn completion_offers_fields_and_enum_values_at_the_path() {
    let (mut client, _, uri) = start("completion");
    let typing = INVALID
        .replace("  - fromEndpoint:", "  - fromEndpoint:\n    ")
        .replace("protocol: tcp", "protocol: ");
    client.open(&uri, &typing);
    // Line 12 (0-based 11) is `    ` inside the ingress item.
    let labels = completions(&mut client, &uri, 11, 4);
    let has = |name: &str| labels.iter().any(|l| l == name);
    assert!(has("fromEntities") && has("icmps"), "{labels:?}");
    // `toPorts` is already there; `egress` belongs to the rule, not the item.
    assert!(!has("toPorts") && !has("egress"), "{labels:?}");
    // The protocol's value.
    let labels = completions(&mut client, &uri, 17, 18);
    assert_eq!(labels, ["TCP", "UDP", "SCTP", "VRRP", "IGMP", "ANY"]);
    assert!(client.stop());
}

fn apply(text: &str, edit: &Value) -> String {
    let line = edit["range"]["start"]["line"].as_u64().unwrap() as usize;
    let start = edit["range"]["start"]["character"].as_u64().unwrap() as usize;
    let end = edit["range"]["end"]["character"].as_u64().unwrap() as usize;
    let mut lines: Vec<String> = text.split('\n').map(str::to_owned).collect();
    // ASCII text: UTF-16 offsets are byte offsets.
    lines[line].replace_range(start..end, edit["newText"].as_str().unwrap());
    lines.join("\n")
}

#[test]
fn quick_fixes_quote_the_port_upper_case_the_protocol_and_fix_the_field() {
    let (mut client, _, uri) = start("actions");
    client.open(&uri, INVALID);
    client.diagnostics(&uri);
    let mut text = INVALID.to_owned();
    for (line, character, title) in [
        (15, 15, "Quote the value: \"8080\""),
        (16, 19, "Replace with `TCP`"),
        (10, 6, "Rename the field to `fromEndpoints`"),
    ] {
        let response = client.request(
            "textDocument/codeAction",
            json!({
                "textDocument": {"uri": uri},
                "range": {"start": {"line": line, "character": character}, "end": {"line": line, "character": character}},
                "context": {"diagnostics": []},
            }),
        );
        let actions = response["result"].as_array().unwrap();
        assert_eq!(actions.len(), 1, "{response}");
        assert_eq!(actions[0]["title"], title);
        assert_eq!(actions[0]["kind"], "quickfix");
        let edits = &actions[0]["edit"]["changes"][&uri];
        text = apply(&text, &edits[0]);
    }
    // The three fixes make the policy valid.
    client.notify(
        "textDocument/didChange",
        json!({"textDocument": {"uri": uri, "version": 2}, "contentChanges": [{"text": text}]}),
    );
    assert_eq!(client.diagnostics(&uri), Vec::<Value>::new(), "{text}");
    assert!(client.stop());
}

#[test]
fn with_an_inventory_the_whole_policy_set_is_linted() {
    let dir = scratch("set");
    let quickstart = workspace_root().join("examples/quickstart");
    std::fs::copy(quickstart.join("policies/api.yaml"), dir.join("a.yaml")).unwrap();
    let b = "\
apiVersion: cilium.io/v2
kind: CiliumNetworkPolicy
metadata:
  name: api-extra
  namespace: shop
spec:
  endpointSelector:
    matchLabels:
      app: api
  ingress:
  - fromEndpoints:
    - matchLabels:
        app: frontend
    toPorts:
    - ports:
      - port: \"8080\"
        protocol: TCP
";
    std::fs::write(dir.join("b.yaml"), b).unwrap();
    // A clean file of the set (not a policy: skipped).
    std::fs::write(
        dir.join("c.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n",
    )
    .unwrap();
    // The workspace's `.porin.yaml` applies, as it does to `porin lint`
    // there: PR005 made an error, PR011 (duplicate rule) off.
    std::fs::write(
        dir.join(".porin.yaml"),
        "rules:\n  duplicate-rule: error\n  PR005: off\n",
    )
    .unwrap();
    let mut client = Client::start(Options::default());
    client.initialize(
        &dir,
        json!({"inventory": quickstart.join("inventory.yaml"), "policies": [&dir]}),
    );
    // Only b.yaml is open; a.yaml is read from disk. Alone, b.yaml has no
    // finding (`porin lint --inventory ... b.yaml`); in the set, its rule
    // duplicates a.yaml's (PR011, reported once as a pair, never as two
    // "delete this rule" PR005s), with a.yaml's rule as related information.
    let b_uri = file_uri(&dir.join("b.yaml"));
    let a_uri = file_uri(&dir.join("a.yaml"));
    client.open(&b_uri, b);
    let mut seen: std::collections::BTreeMap<String, Vec<Value>> = Default::default();
    while !(seen.contains_key(&a_uri) && seen.contains_key(&b_uri)) {
        let m = client.wait(|m| m["method"] == "textDocument/publishDiagnostics");
        seen.insert(
            m["params"]["uri"].as_str().unwrap().to_owned(),
            m["params"]["diagnostics"]
                .as_array()
                .cloned()
                .unwrap_or_default(),
        );
    }
    let b_found = &seen[&b_uri];
    let pr005 = b_found
        .iter()
        .find(|d| d["code"] == "PR011")
        .expect("PR011 (the duplicate pair) on b.yaml");
    assert_eq!(pr005["severity"], 1);
    assert!(!b_found.iter().any(|d| d["code"] == "PR005"), "{b_found:?}");
    assert_eq!(pr005["range"]["start"], json!({"line": 10, "character": 4}));
    let related = &pr005["relatedInformation"][0];
    assert_eq!(related["location"]["uri"], a_uri);
    assert_eq!(
        related["location"]["range"]["start"],
        json!({"line": 12, "character": 4})
    );
    assert_eq!(related["message"], "the same rule");
    // The pair is reported once, at the later item: a.yaml stays clean.
    assert!(seen[&a_uri].is_empty(), "{:?}", seen[&a_uri]);

    // A change that changes no finding publishes nothing, for any file of
    // the set (the clean c.yaml was published once, as clean).
    let c_uri = file_uri(&dir.join("c.yaml"));
    if !seen.contains_key(&c_uri) {
        client.wait(|m| {
            m["method"] == "textDocument/publishDiagnostics" && m["params"]["uri"] == c_uri
        });
    }
    client.notifications.clear();
    client.notify(
        "textDocument/didChange",
        json!({"textDocument": {"uri": b_uri, "version": 2}, "contentChanges": [{"text": format!("{b}# a comment\n")}]}),
    );
    client.request(
        "textDocument/hover",
        json!({"textDocument": {"uri": b_uri}, "position": {"line": 0, "character": 0}}),
    );
    let published: Vec<&Value> = client
        .notifications
        .iter()
        .filter(|n| n["method"] == "textDocument/publishDiagnostics")
        .collect();
    assert_eq!(published, Vec::<&Value>::new());

    // Without the inventory, the same open file is linted alone: clean.
    let mut alone = Client::start(Options::default());
    alone.initialize(&dir, Value::Null);
    alone.open(&b_uri, b);
    assert_eq!(alone.diagnostics(&b_uri), Vec::<Value>::new());
    assert!(alone.stop());
    assert!(client.stop());
}

#[test]
fn malformed_messages_are_answered_not_fatal() {
    let mut client = Client::start(Options::default());
    // Before initialize: ServerNotInitialized.
    let early = client.request("textDocument/hover", json!({}));
    assert_eq!(early["error"]["code"], -32002, "{early}");
    // initialize with nonsense params: InvalidParams, still uninitialized.
    let bad = client.request("initialize", json!({"capabilities": 7}));
    assert_eq!(bad["error"]["code"], -32602, "{bad}");
    let dir = scratch("malformed");
    client.initialize(&dir, json!({"inventory": 3}));
    // Not JSON, not JSON-RPC, a request whose method is not a string.
    client.send_raw(b"{not json");
    client.send_raw(b"[1, 2, 3]");
    client.send_raw(br#"{"jsonrpc": "2.0", "id": 99, "method": 5}"#);
    let invalid = client.wait(|m| m["id"] == 99);
    assert_eq!(invalid["error"]["code"], -32600, "{invalid}");
    // Unknown method; params of the wrong shape.
    let unknown = client.request("textDocument/rename", json!({}));
    assert_eq!(unknown["error"]["code"], -32601, "{unknown}");
    let shape = client.request("textDocument/hover", json!({"textDocument": 1}));
    assert_eq!(shape["error"]["code"], -32602, "{shape}");
    // Positions past the end, documents never opened: no answer, no panic.
    let uri = file_uri(&dir.join("x.yaml"));
    let nothing = client.request(
        "textDocument/hover",
        json!({"textDocument": {"uri": uri}, "position": {"line": 4_000_000_000u32, "character": 4_000_000_000u32}}),
    );
    assert_eq!(nothing["result"], Value::Null);
    client.open(&uri, "a: é\n");
    client.diagnostics(&uri);
    for (line, character) in [(0, 99), (0, 3), (5, 0), (0, 4)] {
        let r = client.request(
            "textDocument/completion",
            json!({"textDocument": {"uri": uri}, "position": {"line": line, "character": character}}),
        );
        assert!(r.get("error").is_none(), "{r}");
    }
    // A change with a range (incremental) past the end is clamped.
    client.notify(
        "textDocument/didChange",
        json!({"textDocument": {"uri": uri, "version": 2}, "contentChanges": [
            {"range": {"start": {"line": 9, "character": 9}, "end": {"line": 0, "character": 0}}, "text": "x"}
        ]}),
    );
    client.diagnostics(&uri);
    // The malformed frames were logged, the bad initializationOptions shown.
    assert!(
        client
            .notifications
            .iter()
            .any(|n| n["method"] == "window/logMessage")
    );
    assert!(
        client
            .notifications
            .iter()
            .any(|n| n["method"] == "window/showMessage")
    );
    assert!(client.stop());
}

#[test]
fn a_document_over_the_size_limit_is_refused_with_pm002() {
    let mut options = Options::default();
    options.limits.load.max_file_bytes = 1000;
    let mut client = Client::start(options);
    let dir = scratch("limit");
    client.initialize(&dir, Value::Null);
    let uri = file_uri(&dir.join("big.yaml"));
    client.open(&uri, &format!("# {}\n", "x".repeat(2000)));
    let diagnostics = client.diagnostics(&uri);
    // The text is not kept, so the range is the start of the file.
    assert_eq!(places(&diagnostics), [(0, 0, 0, "PM002".to_owned())]);
    assert!(
        diagnostics[0]["message"].as_str().unwrap().contains("1000"),
        "{diagnostics:?}"
    );
    assert!(client.stop());
}

#[test]
fn exit_without_shutdown_is_not_clean() {
    let mut client = Client::start(Options::default());
    client.initialize(&scratch("exit"), Value::Null);
    assert!(!client.exit());
}

#[test]
fn codes_link_to_the_docs_when_a_url_is_configured() {
    let dir = scratch("links");
    let mut client = Client::start(Options::default());
    client.initialize(
        &dir,
        json!({"docsUrl": "https://docs.example/codes/{code}.html"}),
    );
    let uri = file_uri(&dir.join("web.yaml"));
    client.open(&uri, INVALID);
    let diagnostics = client.diagnostics(&uri);
    let links: Vec<&str> = diagnostics
        .iter()
        .filter_map(|d| d["codeDescription"]["href"].as_str())
        .collect();
    assert_eq!(
        links,
        [
            "https://docs.example/codes/PM003.html",
            "https://docs.example/codes/PM004.html",
            "https://docs.example/codes/PM023.html",
        ]
    );
    assert!(client.stop());
}
