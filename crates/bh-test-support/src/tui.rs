//! A program on a pseudo-terminal of its own, its screen kept by a terminal
//! emulator (`vt100`): what a person would see, not the bytes that went past
//! (a full-screen program like Pi's TUI clears and redraws, so text that
//! was written may no longer be on screen). Keys go in as bytes.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{Read, Write};
use std::num::NonZeroU16;
use std::os::fd::OwnedFd;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const ROWS: u16 = 40;
const COLS: u16 = 140;

/// The running program and its screen.
pub struct Tui {
    child: Child,
    master: fs_err::File,
    parser: Arc<Mutex<vt100::Parser>>,
}

impl Tui {
    /// Starts `cmd` as the leader of a new session whose controlling
    /// terminal is a fresh pseudo-terminal (a user's terminal, 40×140).
    pub fn spawn(cmd: &Command) -> Tui {
        Tui::start(cmd, false)
    }

    /// [`Tui::spawn`] with none of this process's variables: `cmd`'s own
    /// only (a [`crate::cli::World`] command, whose `env_clear` a `Command`
    /// cannot report, sets every one it allows).
    pub fn spawn_cleared(cmd: &Command) -> Tui {
        Tui::start(cmd, true)
    }

    fn start(cmd: &Command, cleared: bool) -> Tui {
        let (master, slave) = openpty();
        // util-linux `setsid --ctty`: a new session whose controlling
        // terminal is its stdin, then `cmd` as it is (program, arguments,
        // environment, folder).
        let mut run = Command::new("setsid");
        run.arg("--ctty")
            .arg(cmd.get_program())
            .args(cmd.get_args());
        if let Some(dir) = cmd.get_current_dir() {
            run.current_dir(dir);
        }
        if cleared {
            run.env_clear();
        }
        for (key, value) in cmd.get_envs() {
            match value {
                Some(v) => run.env(key, v),
                None => run.env_remove(key),
            };
        }
        run.stdin(Stdio::from(slave.try_clone().unwrap()))
            .stdout(Stdio::from(slave.try_clone().unwrap()))
            .stderr(Stdio::from(slave))
            .env("TERM", "xterm-256color")
            .env("COLUMNS", COLS.to_string())
            .env("LINES", ROWS.to_string());
        let child = run.spawn().unwrap();
        let master = fs_err::File::from_parts(master.into(), "pty master");
        let parser = Arc::new(Mutex::new(vt100::Parser::new(
            NonZeroU16::new(ROWS).unwrap(),
            NonZeroU16::new(COLS).unwrap(),
            0,
        )));
        let mut reader = master.try_clone().unwrap();
        let p = parser.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 8192];
            // EIO once the program and every holder of the slave are gone.
            while let Ok(n) = reader.read(&mut buf) {
                if n == 0 {
                    break;
                }
                p.lock().unwrap().process(&buf[..n]);
            }
        });
        Tui {
            child,
            master,
            parser,
        }
    }

    /// What the screen shows now, row by row.
    pub fn screen(&self) -> String {
        self.parser.lock().unwrap().screen().contents()
    }

    /// Types `keys` (text, `\r` for Enter, escape sequences for others).
    pub fn keys(&mut self, keys: &str) {
        self.master.write_all(keys.as_bytes()).unwrap();
        self.master.flush().unwrap();
    }

    /// Waits until the screen shows `text` — a generous deadline against a
    /// hang, not a timing assertion — and returns the screen.
    pub fn wait_for(&self, text: &str) -> String {
        self.wait_until(text, |s| s.contains(text))
    }

    /// Waits until `done` holds for the screen (`what` names it in the
    /// failure, which prints the screen).
    pub fn wait_until(&self, what: &str, done: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            let screen = self.screen();
            if done(&screen) {
                return screen;
            }
            if Instant::now() > deadline {
                panic!("the screen never showed {what:?}; it shows:\n{screen}");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits (same deadline) until the screen has not changed for `quiet`:
    /// the program is done drawing what it was about to draw.
    pub fn settle(&self, quiet: Duration) -> String {
        let deadline = Instant::now() + Duration::from_secs(90);
        let mut last = self.screen();
        let mut since = Instant::now();
        loop {
            std::thread::sleep(Duration::from_millis(50));
            let now = self.screen();
            if now != last {
                last = now;
                since = Instant::now();
            } else if since.elapsed() >= quiet || Instant::now() > deadline {
                return last;
            }
        }
    }
}

impl Drop for Tui {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn openpty() -> (OwnedFd, OwnedFd) {
    let size = nix::pty::Winsize {
        ws_row: ROWS,
        ws_col: COLS,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    let pty = nix::pty::openpty(Some(&size), None).unwrap();
    // The master is ours alone: not inherited by the program.
    nix::fcntl::fcntl(
        &pty.master,
        nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::FD_CLOEXEC),
    )
    .unwrap();
    (pty.master, pty.slave)
}
