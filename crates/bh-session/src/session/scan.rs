//! One line scanned on its own (no session state), so a large file's lines
//! can be scanned on several threads before the sequential pass (`index`).

use bh_protocol::head::EntryHead;

/// One line as scanned on its own (no session state needed, so lines can be
/// scanned in parallel). Kept unboxed: only one round of pieces is held at a
/// time, and the head moves straight into the sequential pass.
#[allow(clippy::large_enum_variant)]
pub(super) enum LineScan<'a> {
    /// Empty or whitespace only.
    Blank,
    /// The head, or why the line is no entry (bad JSON, not an object).
    Parsed(std::result::Result<EntryHead<'a>, serde_json::Error>),
    /// A `{` line that failed with a data error: retried sequentially with
    /// duplicate keys merged.
    Dedupe(serde_json::Error),
}

pub(super) struct ScannedLine<'a> {
    pub(super) span: (usize, usize),
    pub(super) has_nl: bool,
    /// The line is valid UTF-8 (checked here, on the scanning threads).
    pub(super) utf8: bool,
    pub(super) scan: LineScan<'a>,
}

pub(super) fn scan_line(line: &[u8]) -> LineScan<'_> {
    if line.iter().all(|b| b.is_ascii_whitespace()) {
        return LineScan::Blank;
    }
    let first = line.iter().find(|b| !b.is_ascii_whitespace()).copied();
    if first == Some(b'{') {
        match EntryHead::parse(line) {
            Err(e) if e.is_data() => LineScan::Dedupe(e),
            other => LineScan::Parsed(other),
        }
    } else {
        // Valid JSON that is not an object: Pi parses it, but it is no entry.
        LineScan::Parsed(
            serde_json::from_slice::<serde::de::IgnoredAny>(line)
                .and_then(|_| Err(serde::de::Error::custom("expected a JSON object"))),
        )
    }
}

/// Inputs at least this large are scanned on several threads.
pub(super) const PARALLEL_MIN_BYTES: usize = 4 << 20;

/// About how many bytes one thread scans per round.
pub(super) const PIECE_BYTES: usize = 1 << 20;

/// How many threads scan `len` bytes (1: the single-threaded path).
pub(super) fn scan_workers(len: usize) -> usize {
    if len < PARALLEL_MIN_BYTES {
        return 1;
    }
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .clamp(1, 8)
}

/// Scan `data[from..to]` line by line; `to` is `data.len()` or just past a newline.
fn scan_range(data: &[u8], from: usize, to: usize) -> Vec<ScannedLine<'_>> {
    let mut out = Vec::new();
    let mut start = from;
    while start < to {
        let (end, next, has_nl) = match memchr_nl(&data[start..to]) {
            Some(i) => (start + i, start + i + 1, true),
            None => (to, to, false),
        };
        out.push(ScannedLine {
            span: (start, end),
            has_nl,
            utf8: simdutf8::basic::from_utf8(&data[start..end]).is_ok(),
            scan: scan_line(&data[start..end]),
        });
        start = next;
    }
    out
}

/// `data` cut into up to `pieces` non-empty ranges, each ending just past a
/// newline (the last at the end of `data`).
pub(super) fn split_at_newlines(data: &[u8], pieces: usize) -> Vec<(usize, usize)> {
    let len = data.len();
    let pieces = pieces.max(1);
    let mut ranges = Vec::with_capacity(pieces);
    let mut from = 0usize;
    for i in 1..=pieces {
        if from >= len {
            break;
        }
        let target = (len / pieces * i).max(from);
        let to = if i == pieces {
            len
        } else {
            match memchr_nl(&data[target..]) {
                Some(j) => target + j + 1,
                None => len,
            }
        };
        if to > from {
            ranges.push((from, to));
            from = to;
        }
    }
    ranges
}

/// Scan `ranges` on scoped threads (the first in this one); the results come
/// back in the order of `ranges`.
pub(super) fn scan_parallel<'a>(
    data: &'a [u8],
    ranges: &[(usize, usize)],
) -> Vec<Vec<ScannedLine<'a>>> {
    std::thread::scope(|s| {
        let mut rest = ranges.iter();
        let first = rest.next().copied();
        let handles: Vec<_> = rest
            .map(|&(a, b)| s.spawn(move || scan_range(data, a, b)))
            .collect();
        let mut out = Vec::with_capacity(ranges.len());
        if let Some((a, b)) = first {
            out.push(scan_range(data, a, b));
        }
        for h in handles {
            match h.join() {
                Ok(v) => out.push(v),
                Err(p) => std::panic::resume_unwind(p),
            }
        }
        out
    })
}

/// The first `\n` in `hay`, eight bytes at a time (SWAR, no `unsafe`).
pub(super) fn memchr_nl(hay: &[u8]) -> Option<usize> {
    const LO: u64 = 0x0101_0101_0101_0101;
    const HI: u64 = 0x8080_8080_8080_8080;
    const NL: u64 = LO * b'\n' as u64;
    let mut chunks = hay.chunks_exact(8);
    let mut off = 0usize;
    for c in &mut chunks {
        let mut w = [0u8; 8];
        w.copy_from_slice(c);
        let x = u64::from_le_bytes(w) ^ NL;
        // The lowest flagged byte is always a real `\n` (borrows only run upwards).
        let found = x.wrapping_sub(LO) & !x & HI;
        if found != 0 {
            return Some(off + (found.trailing_zeros() / 8) as usize);
        }
        off += 8;
    }
    chunks
        .remainder()
        .iter()
        .position(|&b| b == b'\n')
        .map(|i| off + i)
}
