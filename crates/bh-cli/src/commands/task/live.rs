//! The worker's output on bh's terminal while it runs.

use bh_task::contain::{Echo, Stream};

use crate::display;

/// The worker's output shown as it comes, line by line (a line longer than
/// 8 KiB is shown in pieces), control characters escaped so the worker
/// cannot drive the terminal. Under `--json` everything goes to stderr.
#[derive(Debug)]
pub(super) struct LiveOutput {
    json: bool,
    /// The unfinished line of stdout and of stderr.
    pending: std::sync::Mutex<[Vec<u8>; 2]>,
}

const LIVE_LINE_MAX: usize = 8 * 1024;

impl LiveOutput {
    pub(super) fn new(json: bool) -> LiveOutput {
        LiveOutput {
            json,
            pending: std::sync::Mutex::new([Vec::new(), Vec::new()]),
        }
    }

    fn show(&self, stream: Stream, line: &[u8]) {
        use std::io::Write;
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let text = String::from_utf8_lossy(line);
        let text = format!("{}\n", display::escape(&text));
        // A reader that went away is not the worker's problem: ignored.
        let _ = match (self.json, stream) {
            (false, Stream::Stdout) => crate::ui::write_bytes(text.as_bytes()),
            _ => std::io::stderr().lock().write_all(text.as_bytes()),
        };
    }
}

impl Echo for LiveOutput {
    fn chunk(&self, stream: Stream, bytes: &[u8]) {
        let mut pending = self
            .pending
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let buf = &mut pending[stream as usize];
        buf.extend_from_slice(bytes);
        while let Some(at) = buf.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = buf.drain(..=at).collect();
            self.show(stream, &line[..at]);
        }
        if buf.len() > LIVE_LINE_MAX {
            let piece = std::mem::take(buf);
            self.show(stream, &piece);
        }
    }

    fn end(&self, stream: Stream) {
        let mut pending = self
            .pending
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let rest = std::mem::take(&mut pending[stream as usize]);
        if !rest.is_empty() {
            self.show(stream, &rest);
        }
    }
}
