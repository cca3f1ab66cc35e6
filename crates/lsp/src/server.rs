//! The server's state machine: one message in, any number of messages out.
//!
//! [`Server::handle`] never fails and never panics: a message it cannot use
//! is answered with the protocol's error (unknown method, invalid params,
//! not initialized) or, for a notification, logged and dropped. Linting is
//! deferred to [`Server::flush`], which the loop calls once the queue of
//! incoming messages is empty, so a burst of keystrokes is linted once.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use lsp_server::{ErrorCode, Message, Notification, Request, RequestId, Response};
use lsp_types::notification::{self as note, Notification as _};
use lsp_types::request::{self as req, Request as _};
use lsp_types::{
    CodeAction, CodeActionKind, CodeActionOptions, CodeActionOrCommand, CodeActionParams,
    CodeActionProviderCapability, CodeDescription, CompletionItem, CompletionItemKind,
    CompletionOptions, CompletionParams, CompletionResponse, CompletionTextEdit,
    DiagnosticRelatedInformation, DiagnosticSeverity, DidChangeTextDocumentParams,
    DidCloseTextDocumentParams, DidOpenTextDocumentParams, Documentation, Hover, HoverContents,
    HoverParams, HoverProviderCapability, InitializeParams, InitializeResult, LogMessageParams,
    MarkupContent, MarkupKind, MessageType, NumberOrString, Position, PublishDiagnosticsParams,
    Range, ServerCapabilities, ServerInfo, ShowMessageParams, TextDocumentSyncCapability,
    TextDocumentSyncKind, TextDocumentSyncOptions, TextEdit, Uri, WorkspaceEdit,
};
use porin_compiler::inventory::Inventory;
use porin_compiler::limits::Limits;
use porin_lint::config::LintConfig;
use porin_model::Diagnostic;
use porin_model::diagnostic::token_width;
use serde::Deserialize;
use serde::de::DeserializeOwned;

use crate::analysis::{self, Setup};
use crate::fields::Fields;
use crate::text::{self, Encoding};
use crate::transport::Frame;
use crate::uri;
use crate::yamlpath::{self, Place, Segment};

/// The default configuration file, found as `porin lint` finds it (in the
/// workspace root here, which is where editors start the server).
pub const CONFIG_FILE: &str = ".porin.yaml";

/// How the server is set up (`porin lsp` flags; the client's
/// `initializationOptions` may add to them).
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Inventory (file or directory): lint the whole policy set with it.
    pub inventory: Option<PathBuf>,
    /// Lint configuration (default: `.porin.yaml` in the workspace root).
    pub config: Option<PathBuf>,
    /// The policy set linted with the inventory (default: the workspace root).
    pub policies: Vec<PathBuf>,
    /// Also show info-level findings (`porin lint -v`).
    pub verbose: bool,
    /// A link for each code: `{code}` is replaced by the code (`PR005`).
    pub docs_url: Option<String>,
    /// Limits of loading, reading the inventory and compiling; a document
    /// is refused above `limits.load.max_file_bytes`.
    pub limits: Limits,
}

/// `initializationOptions`, all optional; relative paths are relative to
/// the workspace root.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct InitOptions {
    inventory: Option<PathBuf>,
    config: Option<PathBuf>,
    policies: Option<Vec<PathBuf>>,
    verbose: Option<bool>,
    docs_url: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Uninitialized,
    Running,
    ShutDown,
}

/// An open document.
struct Document {
    uri: Uri,
    version: i32,
    text: String,
    /// Why the text was not kept (too large), as the finding to show.
    refused: Option<Diagnostic>,
}

/// A diagnostic as published, with its quick fix.
#[derive(Clone, PartialEq)]
struct Published {
    diagnostic: lsp_types::Diagnostic,
    code: &'static str,
    replacement: Option<String>,
}

/// The language server.
pub struct Server {
    options: Options,
    phase: Phase,
    encoding: Encoding,
    root: Option<PathBuf>,
    documents: BTreeMap<String, Document>,
    config: LintConfig,
    inventory: Option<(Inventory, String)>,
    fields: Fields,
    published: BTreeMap<String, Vec<Published>>,
    problems: Vec<String>,
    dirty: bool,
    outgoing: Vec<Message>,
    exit: Option<bool>,
}

/// What [`Server::handle`] asks of the loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    /// Keep reading.
    Continue,
    /// `exit` arrived: stop, successfully when `shutdown` came first.
    Exit {
        /// Whether `shutdown` preceded `exit` (exit code 0).
        clean: bool,
    },
}

impl Server {
    /// A server that has not been initialized yet.
    pub fn new(options: Options) -> Server {
        Server {
            options,
            phase: Phase::Uninitialized,
            encoding: Encoding::Utf16,
            root: None,
            documents: BTreeMap::new(),
            config: LintConfig::default(),
            inventory: None,
            fields: Fields::default(),
            published: BTreeMap::new(),
            problems: Vec::new(),
            dirty: false,
            outgoing: Vec::new(),
            exit: None,
        }
    }

    /// The largest message the transport should accept: a document at the
    /// size limit, JSON-escaped, with room for the envelope.
    pub fn max_message_bytes(&self) -> usize {
        let document =
            usize::try_from(self.options.limits.load.max_file_bytes).unwrap_or(usize::MAX);
        document.saturating_mul(2).saturating_add(1 << 20)
    }

    /// The messages to send, in order.
    pub fn take_outgoing(&mut self) -> Vec<Message> {
        std::mem::take(&mut self.outgoing)
    }

    /// Handles one frame from the transport.
    pub fn handle_frame(&mut self, frame: Frame) -> Flow {
        match frame {
            Frame::Message(message) => self.handle(message),
            Frame::Invalid { reason, id } => {
                match id {
                    Some(id) => self.error(id, ErrorCode::InvalidRequest, reason),
                    None => self.log(
                        MessageType::ERROR,
                        format!("porin lsp: ignored a malformed message: {reason}"),
                    ),
                }
                self.flow()
            }
        }
    }

    fn flow(&self) -> Flow {
        match self.exit {
            Some(clean) => Flow::Exit { clean },
            None => Flow::Continue,
        }
    }

    /// Handles one message.
    pub fn handle(&mut self, message: Message) -> Flow {
        match message {
            Message::Request(request) => self.request(request),
            Message::Notification(notification) => self.notification(notification),
            // porin sends no requests, so expects no responses.
            Message::Response(_) => {}
        }
        self.flow()
    }

    fn send(&mut self, message: impl Into<Message>) {
        self.outgoing.push(message.into());
    }

    fn notify<N: lsp_types::notification::Notification>(&mut self, params: N::Params) {
        self.send(Notification::new(N::METHOD.to_owned(), params));
    }

    fn log(&mut self, typ: MessageType, message: String) {
        self.notify::<note::LogMessage>(LogMessageParams { typ, message });
    }

    fn error(&mut self, id: RequestId, code: ErrorCode, message: String) {
        self.send(Response::new_err(id, code as i32, message));
    }

    fn request(&mut self, request: Request) {
        let Request { id, method, params } = request;
        match (self.phase, method.as_str()) {
            (Phase::Uninitialized, req::Initialize::METHOD) => {
                match parse::<InitializeParams>(params) {
                    Ok(params) => {
                        let result = self.initialize(params);
                        self.send(Response::new_ok(id, result));
                    }
                    Err(error) => self.error(id, ErrorCode::InvalidParams, error),
                }
            }
            (Phase::Uninitialized, _) => self.error(
                id,
                ErrorCode::ServerNotInitialized,
                format!("`{method}` before `initialize`"),
            ),
            (Phase::ShutDown, _) => self.error(
                id,
                ErrorCode::InvalidRequest,
                format!("`{method}` after `shutdown`"),
            ),
            (Phase::Running, req::Initialize::METHOD) => {
                self.error(
                    id,
                    ErrorCode::InvalidRequest,
                    "initialized twice".to_owned(),
                );
            }
            (Phase::Running, req::Shutdown::METHOD) => {
                self.phase = Phase::ShutDown;
                self.send(Response::new_ok(id, ()));
            }
            (Phase::Running, req::HoverRequest::METHOD) => {
                let answer = parse::<HoverParams>(params).map(|p| self.hover(&p));
                self.answer(id, answer);
            }
            (Phase::Running, req::Completion::METHOD) => {
                let answer = parse::<CompletionParams>(params).map(|p| self.complete(&p));
                self.answer(id, answer);
            }
            (Phase::Running, req::CodeActionRequest::METHOD) => {
                let answer = parse::<CodeActionParams>(params).map(|p| self.code_actions(&p));
                self.answer(id, answer);
            }
            (Phase::Running, _) => self.error(
                id,
                ErrorCode::MethodNotFound,
                format!("porin lsp does not implement `{method}`"),
            ),
        }
    }

    fn answer<T: serde::Serialize>(&mut self, id: RequestId, answer: Result<T, String>) {
        match answer {
            Ok(result) => self.send(Response::new_ok(id, result)),
            Err(error) => self.error(id, ErrorCode::InvalidParams, error),
        }
    }

    fn notification(&mut self, notification: Notification) {
        let Notification { method, params } = notification;
        if method == note::Exit::METHOD {
            self.exit = Some(self.phase == Phase::ShutDown);
            return;
        }
        if self.phase != Phase::Running {
            return;
        }
        let result =
            match method.as_str() {
                note::DidOpenTextDocument::METHOD => parse::<DidOpenTextDocumentParams>(params)
                    .map(|p| {
                        let item = p.text_document;
                        self.set_text(item.uri, item.version, item.text);
                    }),
                note::DidChangeTextDocument::METHOD => {
                    parse::<DidChangeTextDocumentParams>(params).map(|p| self.change(p))
                }
                note::DidCloseTextDocument::METHOD => parse::<DidCloseTextDocumentParams>(params)
                    .map(|p| {
                        self.documents.remove(&uri::to_name(&p.text_document.uri));
                        self.dirty = true;
                    }),
                note::DidSaveTextDocument::METHOD => {
                    // The configuration or the inventory may be what was saved.
                    self.load_setup();
                    self.dirty = true;
                    Ok(())
                }
                _ => Ok(()),
            };
        if let Err(error) = result {
            self.log(
                MessageType::WARNING,
                format!("porin lsp: ignored `{method}`: {error}"),
            );
        }
    }

    fn initialize(&mut self, params: InitializeParams) -> InitializeResult {
        self.phase = Phase::Running;
        self.encoding = Encoding::negotiate(
            params
                .capabilities
                .general
                .as_ref()
                .and_then(|g| g.position_encodings.as_deref()),
        );
        #[allow(deprecated)] // rootUri: older clients send only that.
        let root = params
            .workspace_folders
            .as_ref()
            .and_then(|folders| folders.first())
            .and_then(|folder| uri::to_path(&folder.uri))
            .or_else(|| params.root_uri.as_ref().and_then(uri::to_path));
        self.root = root;
        if let Some(value) = params.initialization_options.filter(|v| !v.is_null()) {
            match serde_json::from_value::<InitOptions>(value) {
                Ok(init) => {
                    let base = self.base();
                    let resolve = |p: PathBuf| if p.is_absolute() { p } else { base.join(p) };
                    if let Some(p) = init.inventory {
                        self.options.inventory = Some(resolve(p));
                    }
                    if let Some(p) = init.config {
                        self.options.config = Some(resolve(p));
                    }
                    if let Some(ps) = init.policies {
                        self.options.policies = ps.into_iter().map(resolve).collect();
                    }
                    if let Some(v) = init.verbose {
                        self.options.verbose = v;
                    }
                    if init.docs_url.is_some() {
                        self.options.docs_url = init.docs_url;
                    }
                }
                Err(error) => {
                    self.show(format!("porin lsp: ignored initializationOptions: {error}"));
                }
            }
        }
        self.load_setup();
        InitializeResult {
            capabilities: ServerCapabilities {
                position_encoding: Some(self.encoding.kind()),
                text_document_sync: Some(TextDocumentSyncCapability::Options(
                    TextDocumentSyncOptions {
                        open_close: Some(true),
                        change: Some(TextDocumentSyncKind::FULL),
                        save: Some(lsp_types::TextDocumentSyncSaveOptions::Supported(true)),
                        ..TextDocumentSyncOptions::default()
                    },
                )),
                hover_provider: Some(HoverProviderCapability::Simple(true)),
                completion_provider: Some(CompletionOptions {
                    trigger_characters: Some(vec![" ".to_owned(), "[".to_owned()]),
                    ..CompletionOptions::default()
                }),
                code_action_provider: Some(CodeActionProviderCapability::Options(
                    CodeActionOptions {
                        code_action_kinds: Some(vec![CodeActionKind::QUICKFIX]),
                        ..CodeActionOptions::default()
                    },
                )),
                ..ServerCapabilities::default()
            },
            server_info: Some(ServerInfo {
                name: "porin".to_owned(),
                version: Some(env!("CARGO_PKG_VERSION").to_owned()),
            }),
        }
    }

    /// The workspace root, else the working directory.
    fn base(&self) -> PathBuf {
        self.root
            .clone()
            .or_else(|| std::env::current_dir().ok())
            .unwrap_or_default()
    }

    fn show(&mut self, message: String) {
        self.notify::<note::ShowMessage>(ShowMessageParams {
            typ: MessageType::WARNING,
            message,
        });
    }

    /// (Re)reads the configuration and the inventory; a problem is shown
    /// and leaves the defaults (no inventory: each file alone).
    fn load_setup(&mut self) {
        let base = self.base();
        let config_path = self.options.config.clone().or_else(|| {
            [base.join(CONFIG_FILE), PathBuf::from(CONFIG_FILE)]
                .into_iter()
                .find(|p| p.is_file())
        });
        self.config = LintConfig::default();
        if let Some(path) = config_path {
            match std::fs::read_to_string(&path)
                .map_err(|e| format!("cannot read {}: {e}", path.display()))
                .and_then(|text| {
                    LintConfig::parse(&path.display().to_string(), &text).map_err(|e| e.to_string())
                }) {
                Ok(config) => self.config = config,
                Err(error) => self.show(format!(
                    "porin lsp: {error}; using the default configuration"
                )),
            }
        }
        self.inventory = None;
        if let Some(path) = self.options.inventory.clone() {
            let path = if path.is_absolute() {
                path
            } else {
                base.join(path)
            };
            match Inventory::load_with_limits(&path, &self.options.limits.inventory) {
                Ok(inventory) => self.inventory = Some((inventory, path.display().to_string())),
                Err(error) => self.show(format!(
                    "porin lsp: cannot load the inventory {}: {error}; linting each file alone",
                    path.display()
                )),
            }
        }
    }

    fn set_text(&mut self, uri: Uri, version: i32, text: String) {
        let name = uri::to_name(&uri);
        let limits = &self.options.limits.load;
        let others: u64 = self
            .documents
            .iter()
            .filter(|(n, _)| **n != name)
            .map(|(_, d)| d.text.len() as u64)
            .sum();
        let refused = if text.len() as u64 > limits.max_file_bytes {
            // The loader's own finding for a file over the limit.
            porin_model::load_str(&name, &text, limits)
                .diagnostics
                .into_iter()
                .next()
        } else if others.saturating_add(text.len() as u64) > limits.max_total_bytes {
            Some(Diagnostic::new(
                porin_model::codes::LIMIT_EXCEEDED,
                format!(
                    "the open documents add up to more than {} bytes (LoadLimits::max_total_bytes); close some to lint this one",
                    limits.max_total_bytes
                ),
            ))
        } else {
            None
        };
        let text = if refused.is_some() {
            String::new()
        } else {
            text
        };
        self.documents.insert(
            name,
            Document {
                uri,
                version,
                text,
                refused,
            },
        );
        self.dirty = true;
    }

    fn change(&mut self, params: DidChangeTextDocumentParams) {
        let name = uri::to_name(&params.text_document.uri);
        let Some(document) = self.documents.get(&name) else {
            return;
        };
        let mut content = document.text.clone();
        for change in params.content_changes {
            match change.range {
                // Full sync, as announced.
                None => content = change.text,
                // A client that sends ranges anyway.
                Some(range) => {
                    let start = byte_offset(&content, range.start, self.encoding);
                    let end = byte_offset(&content, range.end, self.encoding).max(start);
                    content.replace_range(start..end, &change.text);
                }
            }
        }
        self.set_text(
            params.text_document.uri,
            params.text_document.version,
            content,
        );
    }

    /// Lints, if anything changed since the last time, and publishes what
    /// changed.
    pub fn flush(&mut self) {
        if !self.dirty || self.phase != Phase::Running {
            return;
        }
        self.dirty = false;
        let open: BTreeMap<String, String> = self
            .documents
            .iter()
            .filter(|(_, d)| d.refused.is_none())
            .map(|(n, d)| (n.clone(), d.text.clone()))
            .collect();
        let base = self.base();
        let policies = if self.options.policies.is_empty() {
            vec![base]
        } else {
            self.options.policies.clone()
        };
        let setup = Setup {
            config: &self.config,
            inventory: self.inventory.as_ref().map(|(i, n)| (i, n.clone())),
            policies: &policies,
            limits: &self.options.limits,
            verbose: self.options.verbose,
        };
        let mut analysis = analysis::analyse(&open, &setup);
        for (name, document) in &self.documents {
            if let Some(refused) = &document.refused {
                analysis.by_file.insert(name.clone(), vec![refused.clone()]);
            }
        }
        let mut now: BTreeMap<String, Vec<Published>> = BTreeMap::new();
        for (file, diagnostics) in &analysis.by_file {
            let published = diagnostics
                .iter()
                .map(|d| self.convert(d, &analysis.sources))
                .collect();
            now.insert(file.clone(), published);
        }
        // Files published before and no longer analysed (closed, left the
        // set): cleared.
        for file in self.published.keys() {
            now.entry(file.clone()).or_default();
        }
        let previous = std::mem::take(&mut self.published);
        for (file, published) in now {
            let unchanged = previous.get(&file) == Some(&published);
            let opened = self.documents.get(&file);
            if !unchanged || (opened.is_some() && !previous.contains_key(&file)) {
                let Some(uri) = opened
                    .map(|d| d.uri.clone())
                    .or_else(|| uri::from_name(&file))
                else {
                    continue;
                };
                self.notify::<note::PublishDiagnostics>(PublishDiagnosticsParams {
                    uri,
                    diagnostics: published.iter().map(|p| p.diagnostic.clone()).collect(),
                    version: opened.map(|d| d.version),
                });
            }
            // Kept: every file analysed (so a clean file is not published
            // again on every change), and findings not yet cleared.
            if !published.is_empty() || analysis.by_file.contains_key(&file) {
                self.published.insert(file, published);
            }
        }
        if analysis.problems != self.problems {
            self.problems = analysis.problems;
            for problem in self.problems.clone() {
                self.show(format!("porin lsp: {problem}"));
            }
        }
    }

    /// The LSP form of a finding: the same code, message and place as
    /// `porin lint`, the range the human renderer underlines.
    fn convert(&self, d: &Diagnostic, sources: &porin_model::SourceMap) -> Published {
        let range_of = |location: &porin_model::Location| {
            let text = sources
                .get(&location.file)
                .or_else(|| self.documents.get(&location.file).map(|d| d.text.as_str()))
                .unwrap_or_default();
            let line = text::line(text, location.line.saturating_sub(1)).unwrap_or_default();
            let width = token_width(line, location.column);
            text::range(text, location.line, location.column, width, self.encoding)
        };
        let range = d.primary.as_ref().map(range_of).unwrap_or_default();
        let mut message = d.message.clone();
        for note in &d.notes {
            message.push_str("\nnote: ");
            message.push_str(note);
        }
        if let Some(help) = &d.help {
            message.push_str("\nhelp: ");
            message.push_str(help);
        }
        let related: Vec<DiagnosticRelatedInformation> = d
            .related
            .iter()
            .filter_map(|(location, label)| {
                Some(DiagnosticRelatedInformation {
                    location: lsp_types::Location::new(
                        uri::from_name(&location.file)?,
                        range_of(location),
                    ),
                    message: if label.is_empty() {
                        location.route.clone()
                    } else {
                        label.clone()
                    },
                })
            })
            .collect();
        let code_description = self.options.docs_url.as_ref().and_then(|template| {
            let href = template.replace("{code}", d.code).parse::<Uri>().ok()?;
            Some(CodeDescription { href })
        });
        let diagnostic = lsp_types::Diagnostic {
            range,
            severity: Some(match d.severity {
                porin_model::Severity::Error => DiagnosticSeverity::ERROR,
                porin_model::Severity::Warning => DiagnosticSeverity::WARNING,
                porin_model::Severity::Info => DiagnosticSeverity::INFORMATION,
            }),
            code: Some(NumberOrString::String(d.code.to_owned())),
            code_description,
            source: Some("porin".to_owned()),
            message,
            related_information: (!related.is_empty()).then_some(related),
            tags: None,
            data: None,
        };
        Published {
            diagnostic,
            code: d.code,
            replacement: porin_model::suggested_replacement(d),
        }
    }

    /// The open document at `uri`, the line at `position` and the byte
    /// offset of the position in it.
    fn locate(&self, uri: &Uri, position: Position) -> Option<(&str, &str, usize)> {
        let document = self.documents.get(&uri::to_name(uri))?;
        let line = text::line(&document.text, position.line)?;
        let byte = text::byte_index(line, position.character, self.encoding);
        Some((document.text.as_str(), line, byte))
    }

    /// The range of the word under the cursor.
    fn word_range(&self, line_no: u32, line: &str, cursor: &yamlpath::Cursor) -> Range {
        let at = |byte| Position::new(line_no, text::offset_of_byte(line, byte, self.encoding));
        Range::new(at(cursor.word_start), at(cursor.word_end))
    }

    fn hover(&mut self, params: &HoverParams) -> Option<Hover> {
        self.flush();
        let position = params.text_document_position_params.position;
        let uri = &params.text_document_position_params.text_document.uri;
        let (text, line, byte) = self.locate(uri, position)?;
        let cursor = yamlpath::cursor(text, position.line as usize, byte)?;
        let word = line
            .get(cursor.word_start..cursor.word_end)
            .unwrap_or_default();
        let mut sections: Vec<String> = Vec::new();
        if let Some(info) = porin_lint::codes::find(word)
            .filter(|_| is_code(word) || line.contains("porin.dev/ignore"))
        {
            sections.push(fenced(&info.document()));
        } else if !word.is_empty() {
            let mut path = cursor.path.clone();
            if cursor.place == Place::Key {
                path.push(Segment::Key(word.to_owned()));
            }
            if let Some(field) = self.fields.field(cursor.kind.as_deref(), &path) {
                let mut text = format!("**{}**: `{}`", field.name, field.type_name);
                if !field.doc.is_empty() {
                    text.push_str("\n\n");
                    text.push_str(&field.doc);
                }
                if cursor.place == Place::Value
                    && let Some(value) = self
                        .fields
                        .values(cursor.kind.as_deref(), &path)
                        .into_iter()
                        .find(|v| v.value == word)
                    && let Some(doc) = value.doc
                {
                    text.push_str(&format!("\n\n`{word}`: {doc}"));
                }
                sections.push(text);
            }
        }
        // The documentation of each finding under the cursor.
        let name = uri::to_name(uri);
        for published in self.published.get(&name).into_iter().flatten() {
            if contains(&published.diagnostic.range, position)
                && let Some(info) = porin_lint::codes::find(published.code)
            {
                sections.push(fenced(&info.document()));
            }
        }
        if sections.is_empty() {
            return None;
        }
        let range = self.word_range(position.line, line, &cursor);
        Some(Hover {
            contents: HoverContents::Markup(MarkupContent {
                kind: MarkupKind::Markdown,
                value: sections.join("\n\n---\n\n"),
            }),
            range: Some(range),
        })
    }

    fn complete(&self, params: &CompletionParams) -> Option<CompletionResponse> {
        let position = params.text_document_position.position;
        let (text, line, byte) =
            self.locate(&params.text_document_position.text_document.uri, position)?;
        let cursor = yamlpath::cursor(text, position.line as usize, byte)?;
        let kind = cursor.kind.as_deref();
        let range = self.word_range(position.line, line, &cursor);
        let has_colon = line
            .get(cursor.word_end..)
            .is_some_and(|rest| rest.trim_start().starts_with(':'));
        let mut items: Vec<CompletionItem> = Vec::new();
        if cursor.place == Place::Value {
            for value in self.fields.values(kind, &cursor.path) {
                items.push(CompletionItem {
                    label: value.value.clone(),
                    kind: Some(CompletionItemKind::ENUM_MEMBER),
                    documentation: value.doc.map(Documentation::String),
                    text_edit: Some(CompletionTextEdit::Edit(TextEdit::new(range, value.value))),
                    ..CompletionItem::default()
                });
            }
        }
        if items.is_empty() {
            for field in self.fields.fields(kind, &cursor.path) {
                if cursor.siblings.contains(&field.name) {
                    continue;
                }
                let insert = if has_colon {
                    field.name.clone()
                } else {
                    format!("{}: ", field.name)
                };
                items.push(CompletionItem {
                    label: field.name.clone(),
                    kind: Some(CompletionItemKind::FIELD),
                    detail: Some(field.type_name),
                    documentation: (!field.doc.is_empty()).then_some(Documentation::MarkupContent(
                        MarkupContent {
                            kind: MarkupKind::Markdown,
                            value: field.doc,
                        },
                    )),
                    text_edit: Some(CompletionTextEdit::Edit(TextEdit::new(range, insert))),
                    ..CompletionItem::default()
                });
            }
        }
        Some(CompletionResponse::Array(items))
    }

    fn code_actions(&mut self, params: &CodeActionParams) -> Vec<CodeActionOrCommand> {
        self.flush();
        let uri = &params.text_document.uri;
        let mut actions = Vec::new();
        for published in self.published.get(&uri::to_name(uri)).into_iter().flatten() {
            let Some(replacement) = &published.replacement else {
                continue;
            };
            let range = published.diagnostic.range;
            if !overlaps(&range, &params.range) {
                continue;
            }
            let title = match published.code {
                "PM003" => format!("Rename the field to `{replacement}`"),
                "PM004" => format!("Quote the value: {replacement}"),
                _ => format!("Replace with `{replacement}`"),
            };
            // lsp-types keys edits by Uri, whose hash and equality are its
            // text (fluent-uri's lazily parsed parts are what clippy sees).
            #[allow(clippy::mutable_key_type)]
            let mut changes = std::collections::HashMap::new();
            changes.insert(uri.clone(), vec![TextEdit::new(range, replacement.clone())]);
            actions.push(CodeActionOrCommand::CodeAction(CodeAction {
                title,
                kind: Some(CodeActionKind::QUICKFIX),
                diagnostics: Some(vec![published.diagnostic.clone()]),
                edit: Some(WorkspaceEdit::new(changes)),
                is_preferred: Some(true),
                ..CodeAction::default()
            }));
        }
        actions
    }
}

fn parse<T: DeserializeOwned>(params: serde_json::Value) -> Result<T, String> {
    serde_json::from_value(params).map_err(|e| format!("invalid params: {e}"))
}

/// `PM001`, `PC004`, `PR015`: a code, not a word that happens to be a rule's name.
fn is_code(word: &str) -> bool {
    let bytes = word.as_bytes();
    bytes.len() == 5
        && bytes[0] == b'P'
        && matches!(bytes[1], b'M' | b'C' | b'R')
        && bytes[2..].iter().all(u8::is_ascii_digit)
}

fn fenced(text: &str) -> String {
    format!("```text\n{}\n```", text.trim_end().replace("```", "'''"))
}

fn contains(range: &Range, position: Position) -> bool {
    range.start <= position && position <= range.end
}

fn overlaps(a: &Range, b: &Range) -> bool {
    a.start <= b.end && b.start <= a.end
}

/// The byte offset of an LSP position in `text` (clamped).
fn byte_offset(text: &str, position: Position, encoding: Encoding) -> usize {
    let mut offset = 0;
    for (index, line) in text.split('\n').enumerate() {
        if index as u64 == u64::from(position.line) {
            let content = line.strip_suffix('\r').unwrap_or(line);
            return offset + text::byte_index(content, position.character, encoding);
        }
        offset += line.len() + 1;
    }
    text.len()
}

/// A path given on the command line, made absolute against the working
/// directory (the server resolves the client's paths against the workspace
/// root instead).
pub fn absolute(path: &Path) -> PathBuf {
    if path.is_absolute() {
        path.to_owned()
    } else {
        std::env::current_dir()
            .map(|d| d.join(path))
            .unwrap_or_else(|_| path.to_owned())
    }
}
