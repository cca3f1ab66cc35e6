//! Editors, end to end with real clients: Neovim's built-in LSP client
//! (headless) running `porin lsp` on an invalid policy, and the JSON Schema
//! (`schema/policy.schema.json`) in the real yaml-language-server
//! (installed with npm into a temporary directory). Both need outside
//! tools (`nvim`; `node` and `npm`): without them the tests print SKIPPED,
//! and fail in CI (`CI=true`, where .ci/run installs them).

#![allow(clippy::unwrap_used, clippy::expect_used, reason = "test code")]

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::Duration;

use serde_json::{Value, json};

use crate::common::{porin, workspace};

fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

/// Fails in CI, prints SKIPPED elsewhere; true when every tool runs.
fn have_tools(tools: &[&str]) -> bool {
    for tool in tools {
        let runs = Command::new(tool)
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !runs {
            assert!(
                !in_ci(),
                "CI=true but `{tool}` is missing (.ci/run installs it)"
            );
            println!("SKIPPED: `{tool}` is not installed");
            return false;
        }
    }
    true
}

fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("editors-{name}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

/// PM003 at 11:5, PM004 at 16:15, PM023 at 17:19 (porin lint's places).
const INVALID: &str = include_str!("../../../../fixtures/editors/invalid-web.yaml");

/// Neovim's client, configured the way docs/editors.md says, writing what
/// `vim.diagnostic.get` holds as JSON lines (Neovim 0.7 API, Debian 12's).
const NVIM_INIT: &str = r#"
local file, out = os.getenv('POLICY'), os.getenv('OUT')
vim.cmd('edit ' .. vim.fn.fnameescape(file))
local buf = vim.api.nvim_get_current_buf()
local id = vim.lsp.start_client({
  name = 'porin',
  cmd = { os.getenv('PORIN'), 'lsp' },
  root_dir = vim.fn.fnamemodify(file, ':h'),
})
vim.lsp.buf_attach_client(buf, id)
local ok = vim.wait(60000, function() return #vim.diagnostic.get(buf) > 0 end, 50)
local lines = {}
for _, d in ipairs(vim.diagnostic.get(buf)) do
  local lsp = d.user_data and d.user_data.lsp or {}
  table.insert(lines, vim.fn.json_encode({
    lnum = d.lnum, col = d.col, end_col = d.end_col, severity = d.severity,
    code = d.code or lsp.code, source = d.source, message = d.message,
  }))
end
if not ok then table.insert(lines, '{"timeout": true}') end
vim.fn.writefile(lines, out)
vim.lsp.stop_client(id)
vim.wait(5000, function() return vim.lsp.get_client_by_id(id) == nil end, 50)
vim.cmd('qall!')
"#;

#[test]
fn headless_neovim_shows_porins_diagnostics_at_porin_lints_places() {
    if !have_tools(&["nvim"]) {
        return;
    }
    let dir = scratch("nvim");
    let policy = dir.join("web.yaml");
    std::fs::write(&policy, INVALID).unwrap();
    std::fs::write(dir.join("init.lua"), NVIM_INIT).unwrap();
    let out = dir.join("diagnostics.jsonl");
    let status = Command::new("nvim")
        .args(["--headless", "--clean", "-u"])
        .arg(dir.join("init.lua"))
        .env("PORIN", env!("CARGO_BIN_EXE_porin"))
        .env("POLICY", &policy)
        .env("OUT", &out)
        .current_dir(&dir)
        .stdin(Stdio::null())
        .status()
        .expect("nvim runs");
    assert!(status.success(), "nvim: {status}");
    let text = std::fs::read_to_string(&out).expect("nvim wrote the diagnostics");
    let mut seen: Vec<(u64, u64, String, String)> = text
        .lines()
        .map(|line| {
            let d: Value = serde_json::from_str(line).expect("json line");
            assert_ne!(d["timeout"], true, "no diagnostics within 60 s");
            assert_eq!(d["source"], "porin");
            let first = d["message"]
                .as_str()
                .unwrap()
                .lines()
                .next()
                .unwrap()
                .to_owned();
            (
                d["lnum"].as_u64().unwrap(),
                d["col"].as_u64().unwrap(),
                d["code"].as_str().unwrap().to_owned(),
                first,
            )
        })
        .collect();
    seen.sort();
    // What `porin lint --format json` says of the same file, 1-based.
    let lint = porin(&["lint", "--format", "json", policy.to_str().unwrap()]);
    let findings: Value = serde_json::from_slice(&lint.stdout).expect("lint json");
    let mut expected: Vec<(u64, u64, String, String)> = findings
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            (
                d["primary"]["line"].as_u64().unwrap() - 1,
                d["primary"]["column"].as_u64().unwrap() - 1,
                d["code"].as_str().unwrap().to_owned(),
                d["message"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    expected.sort();
    assert_eq!(seen, expected);
    // And those are the places a reader counts in the file above.
    let places: Vec<(u64, u64, &str)> = seen
        .iter()
        .map(|(l, c, code, _)| (*l, *c, code.as_str()))
        .collect();
    assert_eq!(
        places,
        [(10, 4, "PM003"), (15, 14, "PM004"), (16, 18, "PM023")]
    );
}

/// A minimal LSP client for yaml-language-server over its stdio.
struct YamlLs {
    child: Child,
    stdin: ChildStdin,
    incoming: Receiver<Value>,
    next_id: i64,
    settings: Value,
}

impl YamlLs {
    fn start(server: &Path, settings: Value) -> YamlLs {
        let mut child = Command::new("node")
            .arg(server)
            .arg("--stdio")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("yaml-language-server starts");
        let stdin = child.stdin.take().unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let (sender, incoming) = mpsc::channel();
        std::thread::spawn(move || {
            loop {
                let mut length = 0usize;
                loop {
                    let mut line = String::new();
                    if stdout.read_line(&mut line).unwrap_or(0) == 0 {
                        return;
                    }
                    let line = line.trim_end();
                    if line.is_empty() {
                        break;
                    }
                    if let Some(n) = line.strip_prefix("Content-Length: ") {
                        length = n.parse().unwrap_or(0);
                    }
                }
                let mut body = vec![0; length];
                if stdout.read_exact(&mut body).is_err() {
                    return;
                }
                if let Ok(value) = serde_json::from_slice(&body)
                    && sender.send(value).is_err()
                {
                    return;
                }
            }
        });
        YamlLs {
            child,
            stdin,
            incoming,
            next_id: 0,
            settings,
        }
    }

    fn send(&mut self, message: &Value) {
        let body = message.to_string();
        write!(self.stdin, "Content-Length: {}\r\n\r\n{body}", body.len()).unwrap();
        self.stdin.flush().unwrap();
    }

    /// Waits for a message matching `want`, answering the server's own
    /// requests (`workspace/configuration` with the settings) on the way.
    fn wait(&mut self, want: impl Fn(&Value) -> bool) -> Value {
        loop {
            let message = self
                .incoming
                .recv_timeout(Duration::from_secs(60))
                .expect("yaml-language-server answers within 60 s");
            if want(&message) {
                return message;
            }
            if let (Some(id), Some(method)) = (message.get("id"), message["method"].as_str()) {
                let result = if method == "workspace/configuration" {
                    let items = message["params"]["items"]
                        .as_array()
                        .cloned()
                        .unwrap_or_default();
                    Value::Array(
                        items
                            .iter()
                            .map(|item| match item["section"].as_str() {
                                Some("yaml") => self.settings["yaml"].clone(),
                                _ => Value::Null,
                            })
                            .collect(),
                    )
                } else {
                    Value::Null
                };
                let reply = json!({"jsonrpc": "2.0", "id": id, "result": result});
                self.send(&reply);
            }
        }
    }

    fn request(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        self.wait(|m| m["id"] == id && m.get("method").is_none())
    }

    fn notify(&mut self, method: &str, params: Value) {
        self.send(&json!({"jsonrpc": "2.0", "method": method, "params": params}));
    }

    fn diagnostics(&mut self, uri: &str, text: &str) -> Vec<Value> {
        self.notify(
            "textDocument/didOpen",
            json!({"textDocument": {"uri": uri, "languageId": "yaml", "version": 1, "text": text}}),
        );
        let m = self.wait(|m| {
            m["method"] == "textDocument/publishDiagnostics" && m["params"]["uri"] == uri
        });
        m["params"]["diagnostics"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }
}

impl Drop for YamlLs {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn yaml_language_server_validates_with_the_committed_schema() {
    if !have_tools(&["node", "npm"]) {
        return;
    }
    let dir = scratch("yaml-ls");
    let install = Command::new("npm")
        .args([
            "install",
            "--no-audit",
            "--no-fund",
            "--silent",
            "yaml-language-server@1",
        ])
        .current_dir(&dir)
        .status()
        .expect("npm runs");
    if !install.success() {
        assert!(
            !in_ci(),
            "npm install yaml-language-server failed: {install}"
        );
        println!("SKIPPED: npm install yaml-language-server failed (offline?)");
        return;
    }
    let server = dir.join("node_modules/yaml-language-server/bin/yaml-language-server");
    let schema = workspace()
        .join("schema/policy.schema.json")
        .canonicalize()
        .unwrap();
    let schema_uri = format!("file://{}", schema.display());
    let settings = json!({"yaml": {
        "validate": true,
        "schemaStore": {"enable": false},
        "schemas": {schema_uri: "*.yaml"},
    }});
    let mut ls = YamlLs::start(&server, settings.clone());
    let root = format!("file://{}", dir.display());
    let init = ls.request(
        "initialize",
        json!({"processId": null, "rootUri": root, "capabilities": {
            "workspace": {"configuration": true, "didChangeConfiguration": {"dynamicRegistration": true}},
            "textDocument": {"publishDiagnostics": {}},
        }}),
    );
    assert!(init.get("result").is_some(), "{init}");
    ls.notify("initialized", json!({}));
    ls.notify(
        "workspace/didChangeConfiguration",
        json!({"settings": settings}),
    );

    // The README's quickstart: no finding.
    let quickstart = workspace().join("examples/quickstart/policies/api.yaml");
    let text = std::fs::read_to_string(&quickstart).unwrap();
    let found = ls.diagnostics(&format!("{root}/api.yaml"), &text);
    assert_eq!(
        found,
        Vec::<Value>::new(),
        "the quickstart has no schema error"
    );

    // An unquoted port and an unknown field: schema errors at their lines.
    let found = ls.diagnostics(&format!("{root}/web.yaml"), INVALID);
    let lines: Vec<u64> = found
        .iter()
        .filter(|d| d["severity"] == 1)
        .filter_map(|d| d["range"]["start"]["line"].as_u64())
        .collect();
    assert!(
        lines.contains(&15),
        "the unquoted port (line 16) is an error: {found:?}"
    );
    assert!(
        lines.contains(&10),
        "the unknown field (line 11) is an error: {found:?}"
    );
}
