//! # porin-lsp: `porin lsp`, porin's language server
//!
//! The findings of `porin lint` while typing: diagnostics on open and on
//! every change, with the same codes, messages and places (the range is the
//! token `porin lint` underlines), from the same pipeline (porin-model's
//! loader and validation, porin-lint's [`porin_lint::verify`], the
//! `.porin.yaml` configuration and, when given, the inventory: then the
//! whole policy set is linted, so a file's findings do not depend on which
//! files happen to be open). Also:
//!
//! - hover: a field's documentation (the model's, as in
//!   `schema/policy.schema.json`), an enum value's, and `porin explain` for
//!   a code or for the findings under the cursor;
//! - completion of field names and enum values at the cursor's YAML path;
//! - quick fixes where a finding suggests one mechanical edit
//!   ([`porin_model::suggested_replacement`]: quote an unquoted port,
//!   upper-case a protocol, the field a typo meant).
//!
//! Protocol: LSP 3.17 over stdio, full document sync, UTF-16 positions
//! unless the client offers UTF-32 or UTF-8. The message types and their
//! framing are rust-analyzer's `lsp-server` (synchronous, no async runtime);
//! the frames are read with porin's own bounds ([`transport`]).
//!
//! Robustness: no message, however malformed, panics the server
//! ([`Server::handle`] answers it with the protocol's error or drops it; the
//! `lsp_messages` fuzz target feeds it arbitrary bytes). A document over
//! `LoadLimits::max_file_bytes`, or open documents over
//! `LoadLimits::max_total_bytes` together, are refused with a `PM002`
//! finding instead of being read.

#![forbid(unsafe_code)]

mod analysis;
mod fields;
pub mod server;
mod text;
pub mod transport;
mod uri;
mod yamlpath;

use std::io::{self, BufReader, Write};
use std::sync::mpsc;

pub use server::{Flow, Options, Server};

/// Runs the server over standard input and output until `exit` (or the end
/// of input). Returns whether the client shut it down properly (`shutdown`
/// then `exit`), the protocol's exit code 0.
pub fn run_stdio(options: Options) -> io::Result<bool> {
    let server = Server::new(options);
    let max = server.max_message_bytes();
    let (sender, receiver) = mpsc::channel();
    // A reader thread, so the loop can see whether more messages are
    // waiting (and lint once after a burst).
    std::thread::spawn(move || {
        let mut input = BufReader::new(io::stdin().lock());
        while let Ok(Some(frame)) = transport::read_frame(&mut input, max) {
            if sender.send(frame).is_err() {
                break;
            }
        }
    });
    let mut output = io::stdout().lock();
    serve(server, &receiver, |message| {
        message.write(&mut output)?;
        output.flush()
    })
}

/// The loop: handles every waiting frame, then lints, then sends. Returns
/// as [`run_stdio`] does, when `exit` arrives or `incoming` closes.
pub fn serve(
    mut server: Server,
    incoming: &mpsc::Receiver<transport::Frame>,
    mut send: impl FnMut(&lsp_server::Message) -> io::Result<()>,
) -> io::Result<bool> {
    loop {
        let Ok(frame) = incoming.recv() else {
            return Ok(false);
        };
        let mut flow = server.handle_frame(frame);
        while flow == Flow::Continue {
            match incoming.try_recv() {
                Ok(frame) => flow = server.handle_frame(frame),
                Err(_) => break,
            }
        }
        if let Flow::Exit { clean } = flow {
            for message in server.take_outgoing() {
                send(&message)?;
            }
            return Ok(clean);
        }
        server.flush();
        for message in server.take_outgoing() {
            send(&message)?;
        }
    }
}
