//! A progress display for long work: on a terminal (stderr a TTY, never with
//! `--json`), the current phase with a spinner and its elapsed time, and a
//! `✓` line with the duration of each phase that finished. Elsewhere it
//! prints nothing, so logs and pipes stay clean.

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use bh_checkpoint::SnapshotProgress;

use crate::display;

const FRAMES: [char; 10] = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];
const TICK: Duration = Duration::from_millis(100);

struct Phase {
    text: String,
    started: Instant,
}

/// The display; dropping it clears the spinner line.
pub struct Progress {
    shared: Option<Arc<Shared>>,
    ticker: Option<JoinHandle<()>>,
}

struct Shared {
    phase: Mutex<Option<Phase>>,
    stop: AtomicBool,
}

impl Progress {
    /// A display when stderr is a terminal and `json` is off, else a no-op.
    pub fn new(json: bool) -> Progress {
        if json || !std::io::stderr().is_terminal() {
            return Progress {
                shared: None,
                ticker: None,
            };
        }
        let shared = Arc::new(Shared {
            phase: Mutex::new(None),
            stop: AtomicBool::new(false),
        });
        let s = Arc::clone(&shared);
        let ticker = std::thread::spawn(move || {
            let mut frame = 0usize;
            while !s.stop.load(Ordering::Relaxed) {
                if let Some(p) = &*s.phase.lock().unwrap_or_else(PoisonError::into_inner) {
                    let mut err = std::io::stderr().lock();
                    let _ = write!(
                        err,
                        "\r\x1b[2K{} {} {}",
                        FRAMES[frame % FRAMES.len()],
                        p.text,
                        elapsed(p.started)
                    );
                    let _ = err.flush();
                }
                frame += 1;
                std::thread::sleep(TICK);
            }
        });
        Progress {
            shared: Some(shared),
            ticker: Some(ticker),
        }
    }

    /// Ends the current phase (a `✓` line) and starts `text`.
    pub fn phase(&self, text: &str) {
        let Some(s) = &self.shared else { return };
        let mut phase = s.phase.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(done) = phase.take() {
            finish_line(&done, '✓');
        }
        *phase = Some(Phase {
            text: display::escape(text).into_owned(),
            started: Instant::now(),
        });
    }

    /// Changes the current phase's text (a counter, a found total), keeping
    /// its start; starts a phase when none runs.
    pub fn update(&self, text: &str) {
        let Some(s) = &self.shared else { return };
        let mut phase = s.phase.lock().unwrap_or_else(PoisonError::into_inner);
        let text = display::escape(text).into_owned();
        match phase.as_mut() {
            Some(p) => p.text = text,
            None => {
                *phase = Some(Phase {
                    text,
                    started: Instant::now(),
                })
            }
        }
    }

    /// Ends the current phase as done.
    pub fn done(&self) {
        self.end('✓');
    }

    /// Ends the current phase as failed.
    pub fn failed(&self) {
        self.end('✗');
    }

    fn end(&self, mark: char) {
        let Some(s) = &self.shared else { return };
        if let Some(p) = s
            .phase
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
        {
            finish_line(&p, mark);
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        if let Some(s) = &self.shared {
            s.stop.store(true, Ordering::Relaxed);
        }
        if let Some(t) = self.ticker.take() {
            let _ = t.join();
        }
        if let Some(s) = &self.shared
            && s.phase
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .is_some()
        {
            let _ = write!(std::io::stderr(), "\r\x1b[2K");
        }
    }
}

fn finish_line(p: &Phase, mark: char) {
    let code = if mark == '✓' {
        display::style::GREEN
    } else {
        display::style::RED
    };
    let mark = display::paint(display::color_stderr(), code, &mark.to_string());
    let _ = writeln!(
        std::io::stderr().lock(),
        "\r\x1b[2K{mark} {} ({})",
        p.text,
        elapsed(p.started)
    );
}

fn elapsed(since: Instant) -> String {
    let secs = since.elapsed().as_secs_f64();
    if secs < 60.0 {
        format!("{secs:.1}s")
    } else {
        format!("{}m{:02}s", (secs / 60.0) as u64, (secs % 60.0) as u64)
    }
}

/// A snapshot's steps on a [`Progress`] display (a first snapshot hashes
/// every file): scanning, what was found, files hashed so far, indexing,
/// writing.
pub struct SnapshotDisplay {
    progress: Progress,
    hashing: AtomicBool,
}

impl SnapshotDisplay {
    pub fn new(json: bool) -> SnapshotDisplay {
        SnapshotDisplay {
            progress: Progress::new(json),
            hashing: AtomicBool::new(false),
        }
    }

    pub fn show(&self, step: SnapshotProgress) {
        let progress = &self.progress;
        match step {
            SnapshotProgress::Seeding => progress.phase("seeding from the repository's index"),
            SnapshotProgress::Scanning => progress.phase("scanning the working tree"),
            SnapshotProgress::Found { files, bytes } => progress.update(&format!(
                "scanning the working tree: {files} path(s) to record, {} in new files",
                bh_checkpoint::human_size(bytes)
            )),
            SnapshotProgress::Hashing { done, total } => {
                let text = format!("hashing new files: {done}/{total}");
                if self.hashing.swap(true, Ordering::Relaxed) {
                    progress.update(&text);
                } else {
                    progress.phase(&text);
                }
            }
            SnapshotProgress::Indexing { files } => {
                progress.phase(&format!("recording {files} path(s) in the index"));
            }
            SnapshotProgress::Committing => progress.phase("writing the checkpoint"),
        }
    }

    /// Ends the running step as done (`ok`) or failed.
    pub fn end(&self, ok: bool) {
        if ok {
            self.progress.done();
        } else {
            self.progress.failed();
        }
    }
}
