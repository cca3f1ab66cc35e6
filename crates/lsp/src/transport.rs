//! The base protocol's framing (`Content-Length: N\r\n\r\n` + N bytes of
//! JSON), read with bounds.
//!
//! lsp-server's own reader allocates whatever `Content-Length` says before
//! reading a byte and reads header lines of any length; porin reads both
//! bounded, skips an oversized message without holding it, and turns every
//! malformed frame into a [`Frame::Invalid`] the server answers or logs:
//! a client can make porin refuse a message, never exhaust memory or panic.

use std::io::{self, BufRead, Read};

use lsp_server::{Message, RequestId};
use serde::Deserialize;
use serde_json::Value;

/// Longest header line read (`Content-Length: ...`, `Content-Type: ...`).
const MAX_HEADER_LINE: usize = 1024;
/// Most header lines of one message.
const MAX_HEADERS: usize = 16;

/// What one frame held.
#[derive(Debug)]
pub enum Frame {
    /// A well-formed message.
    Message(Message),
    /// A frame porin cannot use: why, and the id of the request it was,
    /// when that much could be read (the server answers it with an error).
    Invalid {
        /// Why.
        reason: String,
        /// The request's id, if the JSON had one.
        id: Option<RequestId>,
    },
}

/// Reads one frame; `Ok(None)` at the end of the input. `max_bytes`
/// bounds a message's content.
pub fn read_frame(input: &mut impl BufRead, max_bytes: usize) -> io::Result<Option<Frame>> {
    let mut length: Option<usize> = None;
    let mut problem: Option<String> = None;
    let mut headers = 0usize;
    loop {
        let mut line = Vec::new();
        let read = input
            .by_ref()
            .take(MAX_HEADER_LINE as u64)
            .read_until(b'\n', &mut line)?;
        if read == 0 {
            return Ok(None);
        }
        if line.last() != Some(&b'\n') {
            // Longer than any real header: drop the rest of the line.
            skip_line(input)?;
            problem.get_or_insert_with(|| "a header line is too long".to_owned());
            continue;
        }
        let line = String::from_utf8_lossy(&line);
        let line = line.trim_end_matches(['\r', '\n']);
        if line.is_empty() {
            if length.is_some() || problem.is_some() {
                break;
            }
            // Blank lines between messages are tolerated.
            continue;
        }
        headers += 1;
        if headers > MAX_HEADERS {
            problem.get_or_insert_with(|| "too many header lines".to_owned());
        }
        match line.split_once(':') {
            Some((name, value)) if name.trim().eq_ignore_ascii_case("content-length") => {
                match value.trim().parse::<usize>() {
                    Ok(n) => length = Some(n),
                    Err(_) => {
                        problem.get_or_insert_with(|| {
                            format!("bad Content-Length `{}`", value.trim())
                        });
                    }
                }
            }
            Some(_) => {}
            None => {
                problem.get_or_insert_with(|| format!("malformed header `{line}`"));
            }
        }
    }
    let Some(length) = length else {
        return Ok(Some(Frame::Invalid {
            reason: problem.unwrap_or_else(|| "no Content-Length header".to_owned()),
            id: None,
        }));
    };
    if length > max_bytes {
        let skipped = io::copy(&mut input.by_ref().take(length as u64), &mut io::sink())?;
        if skipped < length as u64 {
            return Ok(None);
        }
        return Ok(Some(Frame::Invalid {
            reason: format!("a message of {length} bytes exceeds the limit of {max_bytes} bytes"),
            id: None,
        }));
    }
    let mut content = Vec::new();
    input
        .by_ref()
        .take(length as u64)
        .read_to_end(&mut content)?;
    if content.len() < length {
        return Ok(None);
    }
    if let Some(reason) = problem {
        return Ok(Some(Frame::Invalid { reason, id: None }));
    }
    Ok(Some(parse(&content)))
}

/// Parses a message's content.
pub fn parse(content: &[u8]) -> Frame {
    let value: Value = match serde_json::from_slice(content) {
        Ok(value) => value,
        Err(error) => {
            return Frame::Invalid {
                reason: format!("not JSON: {error}"),
                id: None,
            };
        }
    };
    let id = value
        .get("id")
        .and_then(|id| RequestId::deserialize(id).ok());
    match Message::deserialize(&value) {
        Ok(message) => Frame::Message(message),
        Err(error) => Frame::Invalid {
            reason: format!("not a JSON-RPC message: {error}"),
            id,
        },
    }
}

fn skip_line(input: &mut impl BufRead) -> io::Result<()> {
    loop {
        let buffer = input.fill_buf()?;
        if buffer.is_empty() {
            return Ok(());
        }
        match buffer.iter().position(|&b| b == b'\n') {
            Some(at) => {
                input.consume(at + 1);
                return Ok(());
            }
            None => {
                let n = buffer.len();
                input.consume(n);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames(bytes: &[u8], max: usize) -> Vec<Frame> {
        let mut input = bytes;
        let mut out = Vec::new();
        while let Some(frame) = read_frame(&mut input, max).unwrap() {
            out.push(frame);
        }
        out
    }

    #[test]
    fn reads_messages_and_refuses_bad_frames_without_stopping() {
        let good = r#"{"jsonrpc":"2.0","method":"initialized","params":{}}"#;
        let mut bytes = format!("Content-Length: {}\r\n\r\n{good}", good.len()).into_bytes();
        bytes.extend_from_slice(b"Content-Length: 99999999\r\n\r\n");
        bytes.extend_from_slice(&[b'x'; 100]);
        let got = frames(&bytes, 1000);
        assert!(
            matches!(&got[0], Frame::Message(Message::Notification(n)) if n.method == "initialized")
        );
        // The oversized frame is cut short by the end of input: no message.
        assert_eq!(got.len(), 1);

        let big = "x".repeat(2000);
        let bytes = format!(
            "Content-Length: 2000\r\n\r\n{big}Content-Length: {}\r\n\r\n{good}",
            good.len()
        );
        let got = frames(bytes.as_bytes(), 1000);
        assert!(matches!(&got[0], Frame::Invalid { reason, .. } if reason.contains("exceeds")));
        assert!(matches!(&got[1], Frame::Message(_)));

        let long_header = format!("X-{}: 1\r\nContent-Length: 2\r\n\r\n{{}}", "a".repeat(5000));
        let got = frames(long_header.as_bytes(), 1000);
        assert!(matches!(&got[0], Frame::Invalid { reason, .. } if reason.contains("too long")));
    }

    #[test]
    fn a_request_that_is_not_json_rpc_keeps_its_id() {
        let Frame::Invalid { id, .. } = parse(br#"{"id": 7, "method": 3}"#) else {
            panic!("parsed");
        };
        assert_eq!(id, Some(RequestId::from(7)));
        assert!(matches!(
            parse(b"\xff\xfe"),
            Frame::Invalid { id: None, .. }
        ));
    }
}
