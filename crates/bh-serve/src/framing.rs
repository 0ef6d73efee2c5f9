//! One request line off a stream: bounded, drained when over-long, and (on
//! the socket) bounded in time as a whole.

use std::io::{self, BufRead, ErrorKind};
use std::time::Instant;

/// What [`read_line`] found.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Line {
    /// A whole line (its newline, when it had one, included) is in the buffer.
    Whole,
    /// The line was longer than the cap: it was read and dropped up to and
    /// including its newline (or the end of input), so its tail is never
    /// taken for a request of its own. Answer it once.
    TooLong,
    /// End of input before any byte.
    Eof,
}

/// Reads one line into `buf` (cleared first), keeping at most `max` bytes.
/// `before_read` runs before every read that may block, e.g. to shrink the
/// socket's read timeout to what is left of a whole-request deadline; its
/// error ends the read.
pub(crate) fn read_line(
    reader: &mut impl BufRead,
    max: usize,
    buf: &mut Vec<u8>,
    before_read: &mut dyn FnMut() -> io::Result<()>,
) -> io::Result<Line> {
    buf.clear();
    let mut too_long = false;
    let mut any = false;
    loop {
        before_read()?;
        let chunk = match reader.fill_buf() {
            Ok(c) => c,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if chunk.is_empty() {
            return Ok(match (any, too_long) {
                (false, _) => Line::Eof,
                (true, true) => Line::TooLong,
                (true, false) => Line::Whole,
            });
        }
        any = true;
        let (take, done) = match chunk.iter().position(|&b| b == b'\n') {
            Some(i) => (i + 1, true),
            None => (chunk.len(), false),
        };
        if !too_long {
            if buf.len() + take > max.saturating_add(1) {
                too_long = true;
                buf.clear();
            } else {
                buf.extend_from_slice(&chunk[..take]);
            }
        }
        reader.consume(take);
        if done {
            return Ok(if too_long { Line::TooLong } else { Line::Whole });
        }
    }
}

/// A `before_read` for [`read_line`] on a socket: the read timeout is what
/// is left until `deadline`; past it, the read fails with `TimedOut`.
pub(crate) fn until(
    stream: &std::os::unix::net::UnixStream,
    deadline: Instant,
) -> impl FnMut() -> io::Result<()> + '_ {
    move || {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::Error::new(
                ErrorKind::TimedOut,
                "the request did not arrive whole in time",
            ));
        }
        stream.set_read_timeout(Some(left))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn lines(input: &[u8], max: usize) -> Vec<(Line, Vec<u8>)> {
        let mut r = io::BufReader::with_capacity(4, input);
        let mut out = Vec::new();
        loop {
            let mut buf = Vec::new();
            let l = read_line(&mut r, max, &mut buf, &mut || Ok(())).unwrap();
            if l == Line::Eof {
                return out;
            }
            out.push((l, buf));
        }
    }

    #[test]
    fn an_over_long_line_is_one_answer_and_its_tail_no_request() {
        let got = lines(b"ok\n0123456789{\"op\":\"prune\"}\nnext\nlast", 8);
        assert_eq!(
            got,
            vec![
                (Line::Whole, b"ok\n".to_vec()),
                (Line::TooLong, Vec::new()),
                (Line::Whole, b"next\n".to_vec()),
                (Line::Whole, b"last".to_vec()),
            ]
        );
        // Exactly at the cap (newline not counted) is still whole.
        assert_eq!(lines(b"12345678\n", 8)[0].0, Line::Whole);
        assert_eq!(lines(b"123456789\n", 8)[0].0, Line::TooLong);
    }
}
