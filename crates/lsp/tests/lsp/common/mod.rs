//! A client for the tests: drives the library's loop over in-memory
//! channels, as an editor drives `porin lsp` over stdio; and the CI/SKIPPED
//! policy for tests that need outside tools (in CI, `CI=true`, a test that
//! cannot run fails; elsewhere it prints `SKIPPED: <reason>` and passes).

#![allow(dead_code, reason = "each test uses a subset")]

use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Receiver, Sender};
use std::thread::JoinHandle;
use std::time::Duration;

use lsp_server::Message;
use porin_lsp::transport::{self, Frame};
use porin_lsp::{Options, Server};
use serde_json::{Value, json};

/// The workspace root.
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("workspace root")
}

/// True when running in CI.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

/// Fails in CI, prints SKIPPED elsewhere.
pub fn skip(reason: &str) {
    assert!(!in_ci(), "CI=true but this test cannot run: {reason}");
    println!("SKIPPED: {reason}");
}

/// A fresh directory under the target's temporary directory.
pub fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("lsp-{name}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

/// The `file:` URI of an absolute path (ASCII paths only, as in the tests).
pub fn file_uri(path: &Path) -> String {
    format!("file://{}", path.display())
}

/// A client talking to a server thread.
pub struct Client {
    to_server: Option<Sender<Frame>>,
    from_server: Receiver<Message>,
    thread: Option<JoinHandle<std::io::Result<bool>>>,
    next_id: i32,
    /// Notifications received while waiting for something else.
    pub notifications: Vec<Value>,
}

impl Client {
    /// Starts a server with `options`.
    pub fn start(options: Options) -> Client {
        let (to_server, incoming) = mpsc::channel::<Frame>();
        let (outgoing, from_server) = mpsc::channel::<Message>();
        let thread = std::thread::spawn(move || {
            porin_lsp::serve(Server::new(options), &incoming, |m| {
                let _ = outgoing.send(m.clone());
                Ok(())
            })
        });
        Client {
            to_server: Some(to_server),
            from_server,
            thread: Some(thread),
            next_id: 0,
            notifications: Vec::new(),
        }
    }

    /// Sends raw JSON (any value: the server must cope).
    pub fn send_raw(&self, bytes: &[u8]) {
        self.to_server
            .as_ref()
            .expect("open")
            .send(transport::parse(bytes))
            .expect("server alive");
    }

    /// Sends a notification.
    pub fn notify(&self, method: &str, params: Value) {
        let message = json!({"jsonrpc": "2.0", "method": method, "params": params});
        self.send_raw(message.to_string().as_bytes());
    }

    /// Sends a request and waits for its response (the whole response object).
    pub fn request(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        let message = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.send_raw(message.to_string().as_bytes());
        self.wait(|m| m.get("id") == Some(&json!(id)) && m.get("method").is_none())
    }

    /// Waits (up to 60 s) for a message matching `want`, keeping
    /// notifications seen on the way.
    pub fn wait(&mut self, want: impl Fn(&Value) -> bool) -> Value {
        loop {
            let message = self
                .from_server
                .recv_timeout(Duration::from_secs(60))
                .expect("the server answers");
            let value = serde_json::to_value(&message).expect("json");
            if want(&value) {
                return value;
            }
            if value.get("method").is_some() {
                self.notifications.push(value);
            }
        }
    }

    /// Waits for the diagnostics published for `uri`.
    pub fn diagnostics(&mut self, uri: &str) -> Vec<Value> {
        let found = self.wait(|m| {
            m["method"] == "textDocument/publishDiagnostics" && m["params"]["uri"] == uri
        });
        found["params"]["diagnostics"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    /// `initialize` + `initialized`, returning the result.
    pub fn initialize(&mut self, root: &Path, options: Value) -> Value {
        let result = self.request(
            "initialize",
            json!({
                "processId": null,
                "rootUri": file_uri(root),
                "capabilities": {},
                "initializationOptions": options,
            }),
        );
        self.notify("initialized", json!({}));
        result
    }

    /// Opens a document.
    pub fn open(&self, uri: &str, text: &str) {
        self.notify(
            "textDocument/didOpen",
            json!({"textDocument": {"uri": uri, "languageId": "yaml", "version": 1, "text": text}}),
        );
    }

    /// `shutdown` + `exit`; returns the server's clean-exit flag.
    pub fn stop(mut self) -> bool {
        let response = self.request("shutdown", Value::Null);
        assert_eq!(response["result"], Value::Null, "{response}");
        self.exit()
    }

    /// `exit`; returns the server's clean-exit flag.
    pub fn exit(mut self) -> bool {
        self.notify("exit", Value::Null);
        self.to_server.take();
        self.thread
            .take()
            .expect("thread")
            .join()
            .expect("no panic")
            .expect("no I/O error")
    }
}

/// (line, character, end character, code) of each LSP diagnostic, sorted.
pub fn places(diagnostics: &[Value]) -> Vec<(u64, u64, u64, String)> {
    let mut out: Vec<(u64, u64, u64, String)> = diagnostics
        .iter()
        .map(|d| {
            (
                d["range"]["start"]["line"].as_u64().unwrap_or(u64::MAX),
                d["range"]["start"]["character"]
                    .as_u64()
                    .unwrap_or(u64::MAX),
                d["range"]["end"]["character"].as_u64().unwrap_or(u64::MAX),
                d["code"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    out.sort();
    out
}
