//! Any bytes → `porin lsp`'s message handling: the bounded framing reader
//! (`Content-Length` frames, however broken) and the server's state machine
//! behind it, after a well-formed `initialize`. Never panics, and every
//! request the transport delivers is answered with exactly one response
//! carrying its id (an error for what the server cannot use).
//!
//! Each input is read twice: as a framed stream, and split at line breaks
//! into bare JSON messages (so the fuzzer reaches the handlers without
//! having to count bytes for `Content-Length`; `lsp_messages.dict` has the
//! methods and fields). Inputs that name paths for the server to read
//! (`inventory`, `policies`, `config` in `initializationOptions`) are
//! rejected: those read the file system, which is not the target.

#![no_main]

use libfuzzer_sys::{Corpus, fuzz_target};
use lsp_server::Message;
use porin_lsp::transport::{self, Frame};
use porin_lsp::{Flow, Options, Server};

const INITIALIZE: &[u8] =
    br#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"capabilities":{},"rootUri":"file:///nonexistent-porin-fuzz"}}"#;

fn run(frames: impl Iterator<Item = Frame>) {
    let mut options = Options::default();
    // Small documents keep each run fast; the limit itself is exercised.
    options.limits.load.max_file_bytes = 16 * 1024;
    options.limits.load.max_total_bytes = 32 * 1024;
    let mut server = Server::new(options);
    let _ = server.handle_frame(transport::parse(INITIALIZE));
    let _ = server.take_outgoing();
    for frame in frames {
        let request_id = match &frame {
            Frame::Message(Message::Request(request)) => Some(request.id.clone()),
            Frame::Invalid { id, .. } => id.clone(),
            _ => None,
        };
        let flow = server.handle_frame(frame);
        server.flush();
        let out = server.take_outgoing();
        if let Some(id) = request_id {
            let answers = out
                .iter()
                .filter(|m| matches!(m, Message::Response(r) if r.id == id))
                .count();
            assert_eq!(answers, 1, "request {id:?} answered {answers} times");
        }
        if matches!(flow, Flow::Exit { .. }) {
            return;
        }
    }
}

fuzz_target!(|data: &[u8]| -> Corpus {
    for word in [&b"inventory"[..], b"policies", b"config"] {
        if data.windows(word.len()).any(|w| w == word) {
            return Corpus::Reject;
        }
    }
    // As a framed stream.
    let mut input = data;
    let frames = std::iter::from_fn(|| transport::read_frame(&mut input, 64 * 1024).ok().flatten());
    run(frames);
    // As bare messages, one a line.
    let chunks: Vec<&[u8]> = data
        .split(|&b| b == b'\n')
        .filter(|c| !c.is_empty())
        .collect();
    run(chunks.into_iter().map(transport::parse));
    Corpus::Keep
});
