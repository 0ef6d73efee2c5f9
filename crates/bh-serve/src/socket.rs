//! Transports: stdio for a spawning parent, and the private per-project Unix
//! socket (server [`Listener`] and caller [`Client`]).

use fs_err as fs;
use fs_err::OpenOptions;
use fs_err::os::unix::fs::OpenOptionsExt;
use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::os::fd::AsFd;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use nix::fcntl::{Flock, FlockArg};
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::socket::{getsockopt, sockopt::PeerCredentials};

use serde_json::Value;

use crate::error::{Result, ServeError};
use crate::framing::{self, Line};
use crate::peer;
use crate::service::{Access, Control, Service};

/// Longest line a peer may send (a request is small; this bounds memory).
const MAX_LINE: usize = 4 << 20;
/// How long a socket peer has to send each whole request (from its
/// connection or its previous answer), however it trickles the bytes.
pub const REQUEST_DEADLINE: Duration = Duration::from_secs(10);
/// Connections served at once; one more gets a `busy` line and is closed.
const MAX_PEERS: usize = 32;

/// Where one project's server keeps its socket, lock and call journal:
/// `<state>/serve/<first 16 hex of sha256(canonical project)>.{sock,lock,calls}`.
#[derive(Debug, Clone)]
pub struct Paths {
    /// `<state>/serve`, `0700`.
    pub dir: PathBuf,
    pub socket: PathBuf,
    /// `flock` held by the live server for its whole life.
    pub lock: PathBuf,
    /// The call journal (JSON lines).
    pub journal: PathBuf,
}

impl Paths {
    /// `project` must be canonical (as [`bh_checkpoint::Store::project`] is).
    pub fn new(state_dir: &Path, project: &Path) -> Result<Paths> {
        let key = bh_checkpoint::project_key(project);
        let dir = state_dir.join("serve");
        // However long: bind and connect go through a short address
        // (`peer::address`) when it passes `sun_path`.
        let socket = dir.join(format!("{key}.sock"));
        Ok(Paths {
            lock: dir.join(format!("{key}.lock")),
            journal: bh_checkpoint::call_journal_path(state_dir, project),
            socket,
            dir,
        })
    }

    /// Creates `dir` (`0700`) when missing and checks it is a directory owned
    /// by the current user and closed to everyone else.
    pub fn ensure_dir(&self) -> Result<()> {
        match bh_fs::create_dir_all_mode(&self.dir, 0o700) {
            Ok(()) => {}
            Err(e) => return Err(ServeError::io("cannot create", &self.dir, e)),
        }
        check_private(&self.dir, Kind::Dir)
    }
}

#[derive(Clone, Copy)]
enum Kind {
    Dir,
    Socket,
    File,
}

fn me() -> u32 {
    nix::unistd::getuid().as_raw()
}

/// `path` (not followed) is of `kind`, owned by the current user and closed
/// to group and others.
fn check_private(path: &Path, kind: Kind) -> Result<()> {
    let meta = fs::symlink_metadata(path).map_err(|e| ServeError::io("cannot inspect", path, e))?;
    check_meta(path, &meta, kind)
}

fn check_meta(path: &Path, meta: &std::fs::Metadata, kind: Kind) -> Result<()> {
    let (ok, expected) = match kind {
        Kind::Dir => (meta.is_dir(), "directory"),
        Kind::Socket => (meta.file_type().is_socket(), "socket"),
        Kind::File => (meta.is_file(), "regular file"),
    };
    if !ok {
        return Err(ServeError::WrongType {
            path: path.to_path_buf(),
            expected,
        });
    }
    if meta.uid() != me() {
        return Err(ServeError::NotOwned {
            path: path.to_path_buf(),
            owner: meta.uid(),
            me: me(),
        });
    }
    if meta.mode() & 0o077 != 0 {
        return Err(ServeError::Insecure {
            path: path.to_path_buf(),
            mode: meta.mode() & 0o7777,
        });
    }
    Ok(())
}

/// The project a hook in `dir` means, found without running git: the nearest
/// ancestor holding `.git` (what `git rev-parse --show-toplevel` finds in an
/// ordinary checkout), else `dir`. The server is told this path and refuses
/// when its own project differs, so a wrong guess only costs the fast path.
pub fn guess_project(dir: &Path) -> std::io::Result<PathBuf> {
    let dir = fs::canonicalize(dir)?;
    let mut cur: &Path = &dir;
    loop {
        if fs::symlink_metadata(cur.join(".git")).is_ok() {
            return Ok(cur.to_path_buf());
        }
        match cur.parent() {
            Some(p) => cur = p,
            None => return Ok(dir),
        }
    }
}

/// Serves requests read from `input` until it ends (or a `shutdown`),
/// writing one response line per request to `output`. Every op is admitted:
/// the peer is the parent that spawned this process.
pub fn serve_stdio(service: &Service, input: impl Read, output: impl Write) -> Result<()> {
    let mut reader = BufReader::new(input);
    serve_lines(
        service,
        &mut reader,
        output,
        Access::Full,
        &mut || Ok(()),
        ("stdin", "stdout"),
    )
}

/// The request loop of both transports: one answer per line, an over-long
/// line answered once (and drained to its newline, never split).
fn serve_lines(
    service: &Service,
    reader: &mut impl BufRead,
    mut output: impl Write,
    access: Access,
    before_read: &mut dyn FnMut() -> std::io::Result<()>,
    (from, to): (&str, &str),
) -> Result<()> {
    let mut line = Vec::new();
    loop {
        let got = framing::read_line(reader, MAX_LINE, &mut line, before_read)
            .map_err(|e| ServeError::io("cannot read a request from", from, e))?;
        let (response, control) = match got {
            Line::Eof => return Ok(()),
            Line::TooLong => (too_long(), Control::Continue),
            Line::Whole if line.iter().all(u8::is_ascii_whitespace) => continue,
            Line::Whole => service.handle_as(&line, access),
        };
        output
            .write_all(response.as_bytes())
            .and_then(|()| output.write_all(b"\n"))
            .and_then(|()| output.flush())
            .map_err(|e| ServeError::io("cannot write a response to", to, e))?;
        if control == Control::Shutdown {
            return Ok(());
        }
    }
}

fn too_long() -> String {
    serde_json::json!({ "id": null, "error": {
        "kind": "usage",
        "message": format!("request line longer than {MAX_LINE} bytes; dropped up to its newline"),
    }})
    .to_string()
}

/// A bound per-project socket; holds the project's server lock for its life
/// and removes the socket when dropped.
#[derive(Debug)]
pub struct Listener {
    listener: UnixListener,
    socket: PathBuf,
    // nix's `Flock` takes a std `File` (opened through fs_err, then `into_file`).
    #[allow(clippy::disallowed_types)]
    _lock: Flock<std::fs::File>,
}

impl Listener {
    /// Takes the project's server lock (another live server →
    /// [`ServeError::AlreadyRunning`]), replaces a stale socket left by a
    /// dead server (only a socket: anything else in its place is refused),
    /// and binds a fresh one, `0600`.
    pub fn bind(paths: &Paths) -> Result<Listener> {
        paths.ensure_dir()?;
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .custom_flags(nix::libc::O_NOFOLLOW)
            .open(&paths.lock)
            .map_err(|e| ServeError::io("cannot open the server lock", &paths.lock, e))?;
        let meta = file
            .metadata()
            .map_err(|e| ServeError::io("cannot inspect", &paths.lock, e))?;
        check_meta(&paths.lock, &meta, Kind::File)?;
        let lock = match Flock::lock(file.into_file(), FlockArg::LockExclusiveNonblock) {
            Ok(l) => l,
            Err((_, nix::errno::Errno::EWOULDBLOCK)) => {
                return Err(ServeError::AlreadyRunning {
                    path: paths.lock.clone(),
                });
            }
            Err((_, e)) => {
                return Err(ServeError::io(
                    "cannot lock",
                    &paths.lock,
                    std::io::Error::from(e),
                ));
            }
        };
        // We hold the lock, so a socket here belongs to a server that died.
        match fs::symlink_metadata(&paths.socket) {
            Ok(meta) if meta.file_type().is_socket() => fs::remove_file(&paths.socket)
                .map_err(|e| ServeError::io("cannot remove the stale socket", &paths.socket, e))?,
            Ok(_) => {
                return Err(ServeError::WrongType {
                    path: paths.socket.clone(),
                    expected: "socket",
                });
            }
            Err(e) if e.kind() == ErrorKind::NotFound => {}
            Err(e) => return Err(ServeError::io("cannot inspect", &paths.socket, e)),
        }
        let address = peer::address(&paths.socket)?;
        let listener = UnixListener::bind(&address.path)
            .map_err(|e| ServeError::io("cannot listen on", &paths.socket, e))?;
        drop(address);
        // The folder is 0700 already; the socket is closed to others too.
        fs::set_permissions(&paths.socket, std::fs::Permissions::from_mode(0o600))
            .map_err(|e| ServeError::io("cannot restrict", &paths.socket, e))?;
        Ok(Listener {
            listener,
            socket: paths.socket.clone(),
            _lock: lock,
        })
    }

    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// Serves connections, each on a thread of its own (at most
    /// `MAX_PEERS` at once), until none was open for `idle` or the project
    /// folder is gone. Only `ping` and `snapshot` are admitted
    /// ([`Access::Snapshot`]); a peer that is not served ([`peer::refusal`])
    /// gets one error line and is disconnected; a peer gets
    /// [`REQUEST_DEADLINE`] for each whole request line.
    pub fn serve(&self, service: &Service, idle: Duration) -> Result<()> {
        self.serve_with(service, idle, REQUEST_DEADLINE)
    }

    /// [`Listener::serve`] with another whole-request deadline (tests).
    pub fn serve_with(&self, service: &Service, idle: Duration, deadline: Duration) -> Result<()> {
        let open = AtomicUsize::new(0);
        let last = Mutex::new(Instant::now());
        let touch = || {
            if let Ok(mut l) = last.lock() {
                *l = Instant::now();
            }
        };
        std::thread::scope(|scope| {
            loop {
                let since = last.lock().map(|l| l.elapsed()).unwrap_or_default();
                let busy = open.load(Ordering::SeqCst) > 0;
                let left = if busy {
                    idle
                } else {
                    idle.saturating_sub(since)
                };
                // Idle, or the project is gone (a deleted temp folder): stop.
                if left.is_zero() || !service.project().is_dir() {
                    return Ok(());
                }
                let wait = PollTimeout::try_from(left.min(Duration::from_secs(1)))
                    .unwrap_or(PollTimeout::MAX);
                let mut fds = [PollFd::new(self.listener.as_fd(), PollFlags::POLLIN)];
                match poll(&mut fds, wait) {
                    Ok(0) => continue,
                    Ok(_) => {}
                    Err(nix::errno::Errno::EINTR) => continue,
                    Err(e) => {
                        return Err(ServeError::io(
                            "cannot wait on",
                            &self.socket,
                            std::io::Error::from(e),
                        ));
                    }
                }
                let mut stream = match self.listener.accept() {
                    Ok((s, _)) => s,
                    Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                    Err(e) => return Err(ServeError::io("cannot accept on", &self.socket, e)),
                };
                touch();
                if open.load(Ordering::SeqCst) >= MAX_PEERS {
                    let _ = stream.set_write_timeout(Some(Duration::from_secs(1)));
                    let _ = refuse(&mut stream, "busy", "too many connections; try again");
                    continue;
                }
                open.fetch_add(1, Ordering::SeqCst);
                let (open, touch) = (&open, &touch);
                scope.spawn(move || {
                    connection(service, stream, deadline);
                    touch();
                    open.fetch_sub(1, Ordering::SeqCst);
                });
            }
        })
    }
}

fn refuse(stream: &mut UnixStream, kind: &str, message: &str) -> std::io::Result<()> {
    let line = serde_json::json!({ "id": null, "error": { "kind": kind, "message": message }});
    writeln!(stream, "{line}")
}

/// One peer's requests, each due whole within `deadline`.
fn connection(service: &Service, mut stream: UnixStream, deadline: Duration) {
    let _ = stream.set_write_timeout(Some(deadline));
    if let Some(why) = peer::refusal(&stream) {
        let _ = refuse(&mut stream, "refused", &why);
        return;
    }
    let Ok(write_half) = stream.try_clone() else {
        return;
    };
    let Ok(read_half) = stream.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(read_half);
    // The deadline of the request being read: reset after every answer.
    let due = std::cell::Cell::new(Instant::now() + deadline);
    let writer = Answered {
        inner: write_half,
        on_answer: || due.set(Instant::now() + deadline),
    };
    let mut before = || framing::until(&stream, due.get())();
    // A read error (deadline, reset) or a write error just ends it.
    let _ = serve_lines(
        service,
        &mut reader,
        writer,
        Access::Snapshot,
        &mut before,
        ("the socket", "the socket"),
    );
}

/// A writer that runs `on_answer` after each flush (one per answer).
struct Answered<W, F> {
    inner: W,
    on_answer: F,
}

impl<W: Write, F: FnMut()> Write for Answered<W, F> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.inner.write(buf)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()?;
        (self.on_answer)();
        Ok(())
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        // Still holding the lock: the socket is ours.
        let _ = fs::remove_file(&self.socket);
    }
}

/// The caller's side of a project's socket.
#[derive(Debug)]
pub struct Client {
    stream: BufReader<UnixStream>,
    socket: PathBuf,
    next_id: u64,
}

impl Client {
    /// Connects after checking that the socket is the current user's and that
    /// the process listening on it runs as the current user.
    /// [`ServeError::NoServer`] when nothing listens there.
    pub fn connect(paths: &Paths, timeout: Duration) -> Result<Client> {
        match fs::symlink_metadata(&paths.socket) {
            Ok(_) => {}
            Err(e) if e.kind() == ErrorKind::NotFound => {
                return Err(ServeError::NoServer {
                    path: paths.socket.clone(),
                });
            }
            Err(e) => return Err(ServeError::io("cannot inspect", &paths.socket, e)),
        }
        let address = peer::address(&paths.socket)?;
        let stream = match UnixStream::connect(&address.path) {
            Ok(s) => s,
            Err(e) if matches!(e.kind(), ErrorKind::ConnectionRefused | ErrorKind::NotFound) => {
                return Err(ServeError::NoServer {
                    path: paths.socket.clone(),
                });
            }
            Err(e) => return Err(ServeError::io("cannot connect to", &paths.socket, e)),
        };
        // Someone listens: only talk to it through a private folder and
        // socket, and only when it runs as us.
        check_private(&paths.dir, Kind::Dir)?;
        check_private(&paths.socket, Kind::Socket)?;
        let uid = getsockopt(&stream, PeerCredentials)
            .map(|c| c.uid())
            .map_err(|e| {
                ServeError::io(
                    "cannot read the peer of",
                    &paths.socket,
                    std::io::Error::from(e),
                )
            })?;
        if uid != me() {
            return Err(ServeError::PeerNotOwner {
                path: paths.socket.clone(),
                uid,
                me: me(),
            });
        }
        stream
            .set_read_timeout(Some(timeout))
            .and_then(|()| stream.set_write_timeout(Some(timeout)))
            .map_err(|e| ServeError::io("cannot set a timeout on", &paths.socket, e))?;
        Ok(Client {
            stream: BufReader::new(stream),
            socket: paths.socket.clone(),
            next_id: 1,
        })
    }

    /// Sends `request` (an object; its `id` is set here) and returns the
    /// response document (`ok` or `error`).
    pub fn request(&mut self, mut request: Value) -> Result<Value> {
        let id = self.next_id;
        self.next_id += 1;
        if let Some(obj) = request.as_object_mut() {
            obj.insert("id".into(), Value::from(id));
        }
        let mut line = request.to_string();
        line.push('\n');
        self.stream
            .get_mut()
            .write_all(line.as_bytes())
            .map_err(|e| ServeError::io("cannot send a request to", &self.socket, e))?;
        let mut answer = Vec::new();
        let n = (&mut self.stream)
            .take((MAX_LINE as u64) * 4)
            .read_until(b'\n', &mut answer)
            .map_err(|e| ServeError::io("no answer from", &self.socket, e))?;
        if n == 0 || answer.last() != Some(&b'\n') {
            return Err(ServeError::Closed {
                path: self.socket.clone(),
            });
        }
        serde_json::from_slice(&answer).map_err(|source| ServeError::BadResponse {
            path: self.socket.clone(),
            source,
        })
    }
}
