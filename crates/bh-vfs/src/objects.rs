//! The base's objects, read through one long-lived `git cat-file --batch`
//! owned by a thread of its own: a git child dies with the thread that
//! started it (`bh_git::GitProcess`), and the tools run on the async
//! runtime's short-lived blocking threads. A child that died is started again
//! once per request.

use std::io::{BufRead, Read, Write};
use std::sync::Mutex;
use std::sync::mpsc;
use std::thread::JoinHandle;

use bh_git::{GitProcess, Repo};

use crate::error::VfsError;

/// One object as `cat-file` answered.
#[derive(Debug)]
pub(crate) enum Object {
    Missing,
    Found {
        kind: String,
        size: u64,
        /// `None` when the object is larger than the request's cap (its
        /// bytes were read past, not kept).
        body: Option<Vec<u8>>,
    },
}

struct Request {
    oid: String,
    cap: u64,
    reply: mpsc::Sender<Result<Object, String>>,
}

/// The reader; see the module docs.
#[derive(Debug)]
pub(crate) struct Objects {
    tx: Mutex<Option<mpsc::Sender<Request>>>,
    worker: Mutex<Option<JoinHandle<()>>>,
}

impl Objects {
    pub(crate) fn start(repo: &Repo) -> Objects {
        let (tx, rx) = mpsc::channel::<Request>();
        let repo = repo.clone();
        let worker = std::thread::Builder::new()
            .name("bh-vfs cat-file".into())
            .spawn(move || serve(&repo, &rx))
            .ok();
        Objects {
            tx: Mutex::new(Some(tx)),
            worker: Mutex::new(worker),
        }
    }

    /// The object `oid`, its bytes kept when at most `cap` long.
    pub(crate) fn get(&self, oid: &str, cap: u64) -> Result<Object, VfsError> {
        let (reply, answer) = mpsc::channel();
        let sent = self
            .tx
            .lock()
            .map_err(|_| VfsError::Reader("poisoned".into()))?
            .as_ref()
            .map(|tx| {
                tx.send(Request {
                    oid: oid.to_owned(),
                    cap,
                    reply,
                })
            });
        match sent {
            Some(Ok(())) => {}
            _ => return Err(VfsError::Reader("the reader thread is gone".into())),
        }
        answer
            .recv()
            .map_err(|_| VfsError::Reader("the reader thread is gone".into()))?
            .map_err(VfsError::Reader)
    }
}

impl Drop for Objects {
    fn drop(&mut self) {
        if let Ok(mut tx) = self.tx.lock() {
            tx.take();
        }
        if let Ok(mut w) = self.worker.lock()
            && let Some(handle) = w.take()
        {
            let _ = handle.join();
        }
    }
}

fn serve(repo: &Repo, rx: &mpsc::Receiver<Request>) {
    let mut process: Option<GitProcess> = None;
    while let Ok(req) = rx.recv() {
        let mut answer = Err(String::new());
        for _attempt in 0..2 {
            if process.is_none() {
                match repo.cmd(["cat-file", "--batch"]).spawn_process() {
                    Ok(p) => process = Some(p),
                    Err(e) => {
                        answer = Err(e.to_string());
                        break;
                    }
                }
            }
            let Some(p) = process.as_mut() else { break };
            answer = ask(p, &req.oid, req.cap);
            if answer.is_ok() {
                break;
            }
            process = None;
        }
        let _ = req.reply.send(answer);
    }
}

fn ask(p: &mut GitProcess, oid: &str, cap: u64) -> Result<Object, String> {
    let argv = p.argv().to_owned();
    let io = |e: std::io::Error| format!("{argv}: {e}");
    p.stdin
        .write_all(format!("{oid}\n").as_bytes())
        .map_err(io)?;
    p.stdin.flush().map_err(io)?;
    let mut header = String::new();
    p.stdout.read_line(&mut header).map_err(io)?;
    let line = header.trim_end_matches('\n');
    let parts: Vec<&str> = line.split(' ').collect();
    match parts.as_slice() {
        [_, "missing"] | [_, "ambiguous"] => Ok(Object::Missing),
        [_, kind, size] => {
            let size: u64 = size
                .parse()
                .map_err(|_| format!("{argv} said {header:?}"))?;
            let body = if size <= cap {
                let mut body = vec![0; usize::try_from(size).map_err(|e| e.to_string())?];
                p.stdout.read_exact(&mut body).map_err(io)?;
                Some(body)
            } else {
                let copied = std::io::copy(&mut (&mut p.stdout).take(size), &mut std::io::sink())
                    .map_err(io)?;
                if copied != size {
                    return Err(format!("{argv}: short object"));
                }
                None
            };
            let mut lf = [0u8; 1];
            p.stdout.read_exact(&mut lf).map_err(io)?;
            Ok(Object::Found {
                kind: (*kind).to_owned(),
                size,
                body,
            })
        }
        _ => Err(format!("{argv} said {header:?}")),
    }
}
