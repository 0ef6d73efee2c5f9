//! Commits from the sandbox: `bash` may run `git add`, `commit`, `commit
//! --amend`, `stash` and `branch` on the checkout's own branch, while the
//! real git dir stays read-only to it.
//!
//! The mechanism (argued in ARCHITECTURE.md, "Commits from the sandbox"):
//! inside the sandbox the root's common dir (and its git dir, when that
//! lies elsewhere) is an overlay — the real folder the read-only lower
//! layer, every write going to a private upper folder the command cannot
//! see. Nothing it writes there reaches the repository by itself: config,
//! hooks, `info/`, other worktrees' state stay inside that one call. After
//! the command, the broker (this module, in the harness, outside the
//! sandbox) reads the upper folder as untrusted data and carries over only:
//! - objects, re-hashed and checked by `index-pack --strict`;
//! - the branch the checkout is on (any commit: commit, amend, reset),
//!   branches the command created, and later moves or deletion of branches
//!   a command of the agent created (their reflog's first entry is the
//!   broker's) as long as nobody else changed them since (every entry is
//!   the broker's), each by `update-ref` from the value it had when the
//!   command started;
//! - `HEAD` switched to one of those branches;
//! - stash entries pushed, and dropping entries the agent pushed;
//! - the index, rebuilt entry by entry under its lock.
//!
//! Every other ref change (other branches, tags, `refs/replace`, notes,
//! a detached `HEAD`) is refused and named in the tool result. Every change
//! carried over is in the ref's reflog under "bh: …" and in the result's
//! `details.git`, with the value before it.

#[path = "git_broker/apply.rs"]
mod apply;
#[path = "git_broker/report.rs"]
mod report;
#[path = "git_broker/upper.rs"]
mod upper;

pub(crate) use report::Brokered;

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use bh_git::{GitRunner, Repo, Scope};
use upper::{Loose, RefVal};

/// The first reflog message of a branch a command of the agent created.
const CREATED: &str = "bh: branch created by the agent's bash";
/// The HEAD reflog message of a switch the broker made.
const SWITCHED: &str = "bh: the agent's bash switched";
/// The message prefix of a stash entry the agent pushed.
const STASHED: &str = "[bh agent] ";

/// One command's overlay of the git dir, and what was true before it.
pub(crate) struct GitOverlay {
    scratch: PathBuf,
    common: PathBuf,
    git_dir: PathBuf,
    /// The overlays to mount: `(target, upper, work)`.
    mounts: Vec<(PathBuf, PathBuf, PathBuf)>,
    /// The git dir's path in the upper folder holding it.
    git_dir_upper: PathBuf,
    common_upper: PathBuf,
    refs: BTreeMap<String, RefVal>,
    head: Option<RefVal>,
    /// The stash reflog when the command started (oldest first).
    stash: Vec<(String, String)>,
    zero: String,
}

fn lossy(p: &[u8]) -> PathBuf {
    PathBuf::from(OsStr::from_bytes(p))
}

impl GitOverlay {
    /// For the repository at `root`, when it has one whose refs are files:
    /// the snapshot of its refs and fresh overlay folders under `scratch`.
    /// `Ok(None)`: no overlay (no repository, or a ref backend the broker
    /// does not read); the git dir then stays read-only as before.
    pub(crate) fn prepare(
        root: &Path,
        runner: &GitRunner,
        scratch: &Path,
    ) -> Result<Option<GitOverlay>, String> {
        let repo = runner.repo(root, Scope::User);
        let Ok(out) = repo.run([
            "rev-parse",
            "--path-format=absolute",
            "--git-dir",
            "--git-common-dir",
            "--show-object-format",
        ]) else {
            return Ok(None);
        };
        let lines: Vec<&[u8]> = out.split(|b| *b == b'\n').collect();
        let [git_dir, common, object_format, ..] = lines[..] else {
            return Ok(None);
        };
        let canon = |p: &[u8]| fs_err::canonicalize(lossy(p)).map_err(|e| e.to_string());
        let (git_dir, common) = (canon(git_dir)?, canon(common)?);
        let zero = "0".repeat(if object_format == b"sha256" { 64 } else { 40 });
        // Files only (a reftable repository keeps its git dir read-only).
        if common.join("reftable").exists() {
            return Ok(None);
        }
        // Read in-process, no git spawned: this runs before every command.
        let refs = snapshot(&common);
        let head = fs_err::read(git_dir.join("HEAD"))
            .ok()
            .and_then(|b| upper::parse_ref(&b));
        let stash = upper::reflog(&common.join("logs/refs/stash"));
        let scratch = unique_folder(scratch)?;
        let layer = |name: &str| -> Result<(PathBuf, PathBuf), String> {
            let upper = scratch.join(name).join("upper");
            let work = scratch.join(name).join("work");
            for d in [&upper, &work] {
                bh_fs::create_dir_all_mode(d, 0o700)
                    .map_err(|e| format!("{}: {e}", d.display()))?;
            }
            Ok((upper, work))
        };
        let (cu, cw) = layer("common")?;
        let mut mounts = vec![(common.clone(), cu.clone(), cw)];
        let git_dir_upper = match git_dir.strip_prefix(&common) {
            Ok(rel) => cu.join(rel),
            Err(_) => {
                let (gu, gw) = layer("git-dir")?;
                mounts.push((git_dir.clone(), gu.clone(), gw));
                gu
            }
        };
        Ok(Some(GitOverlay {
            scratch,
            common,
            git_dir,
            mounts,
            git_dir_upper,
            common_upper: cu,
            refs,
            head,
            stash,
            zero,
        }))
    }

    /// The root's git dir and common dir, as git named them (canonical).
    pub(crate) fn dirs(&self) -> (&Path, &Path) {
        (&self.git_dir, &self.common)
    }

    /// The folders the sandbox overlays (kept out of its read-only list).
    pub(crate) fn targets(&self) -> Vec<PathBuf> {
        self.mounts.iter().map(|(t, _, _)| t.clone()).collect()
    }

    pub(crate) fn overlays(&self) -> Vec<bh_sandbox::Overlay> {
        self.mounts
            .iter()
            .map(|(t, u, w)| bh_sandbox::Overlay {
                target: t.clone(),
                upper: u.clone(),
                work: w.clone(),
            })
            .collect()
    }

    /// After the command: carries over what the policy allows, then
    /// removes the overlay's folders.
    pub(crate) fn finish(self, runner: &GitRunner, root: &Path) -> Brokered {
        let repo = runner.repo(root, Scope::User);
        let mut done = Brokered::default();
        self.broker(&repo, &mut done);
        remove_all(&self.scratch);
        done
    }

    fn broker(&self, repo: &Repo, done: &mut Brokered) {
        let changes = self.ref_changes();
        let index = self
            .in_git_dir_upper("index")
            .filter(|f| fs_err::symlink_metadata(f).is_ok_and(|m| m.is_file()))
            .map(|f| apply::index_entries(repo, &f));
        let stash_after = upper::has(&self.common_upper, "logs/refs/stash")
            .then(|| upper::inside(&self.common_upper, "logs/refs/stash"))
            .flatten()
            .map(|f| upper::reflog(&f));
        let head_after = self.head_after();
        if changes.is_empty() && index.is_none() && stash_after.is_none() && head_after.is_none() {
            return;
        }
        let written = upper::objects(&self.common_upper);
        if !written.loose.is_empty() || !written.packs.is_empty() {
            match apply::import(repo, &self.common.join("objects"), &written, &self.scratch) {
                Ok(n) => done.objects = n,
                Err(e) => {
                    done.refused.push((".git/objects".into(), e));
                    return;
                }
            }
        }
        let current = match &self.head {
            Some(RefVal::Sym(b)) => Some(b.clone()),
            _ => None,
        };
        let mut created: BTreeSet<String> = BTreeSet::new();
        for (name, after) in &changes {
            self.one_ref(
                repo,
                name,
                after.as_ref(),
                current.as_deref(),
                &mut created,
                done,
            );
        }
        if let Some(after) = stash_after {
            self.stash(repo, &after, done);
        }
        if let Some(h) = head_after {
            self.switch_head(repo, &h, &created, done);
        }
        match index {
            None => {}
            Some(Err(e)) => done.refused.push(("the index".into(), e)),
            Some(Ok(entries)) => self.index(repo, entries, done),
        }
    }

    /// Refs whose value after the command differs from the snapshot.
    fn ref_changes(&self) -> Vec<(String, Option<RefVal>)> {
        let up = upper::loose_refs(&self.common_upper);
        let up_packed = upper::packed_refs(&self.common_upper);
        let real_packed = upper::packed_refs(&self.common).unwrap_or_default();
        let packed = up_packed.as_ref().unwrap_or(&real_packed);
        let mut names: BTreeSet<String> = up.keys().cloned().collect();
        if let Some(p) = &up_packed {
            names.extend(p.keys().cloned());
            names.extend(real_packed.keys().cloned());
        }
        names.remove("refs/stash");
        let from_packed = |n: &str| packed.get(n).map(|o| RefVal::Oid(o.clone()));
        let mut out = Vec::new();
        for name in names {
            let after = match up.get(&name) {
                Some(Loose::Value(v)) => Some(v.clone()),
                Some(Loose::Garbage) => {
                    continue;
                }
                Some(Loose::Whiteout) => from_packed(&name),
                None => fs_err::read(self.common.join(&name))
                    .ok()
                    .and_then(|b| upper::parse_ref(&b))
                    .or_else(|| from_packed(&name)),
            };
            if after.as_ref() != self.refs.get(&name) {
                out.push((name, after));
            }
        }
        out
    }

    /// `rel` in the upper folder of the git dir, reached without a link.
    fn in_git_dir_upper(&self, rel: &str) -> Option<PathBuf> {
        match self.git_dir_upper.strip_prefix(&self.common_upper) {
            Ok(under) => upper::inside(&self.common_upper, under.join(rel)),
            // The git dir has an upper folder of its own.
            Err(_) => upper::inside(&self.git_dir_upper, rel),
        }
    }

    fn head_after(&self) -> Option<RefVal> {
        let file = self.in_git_dir_upper("HEAD")?;
        let meta = fs_err::symlink_metadata(&file).ok()?;
        let after = meta
            .is_file()
            .then(|| fs_err::read(&file).ok())
            .flatten()
            .and_then(|b| upper::parse_ref(&b));
        (after != self.head).then_some(after).flatten()
    }

    /// Whether `name` is still the agent's: a command of the agent created
    /// it (the reflog's first entry) and every change since was the broker's
    /// (`bh: …`). A branch the user adopted — committed on, reset, renamed
    /// onto — is the user's from then on.
    fn agent_owns(&self, name: &str) -> Result<bool, &'static str> {
        let log = upper::reflog(&self.common.join("logs").join(name));
        if !log.first().is_some_and(|(_, msg)| msg.starts_with(CREATED)) {
            return Ok(false);
        }
        if log.iter().all(|(_, msg)| msg.starts_with("bh: ")) {
            Ok(true)
        } else {
            Err(
                "a branch the agent created, but changed since outside the sandbox (it is the user's now)",
            )
        }
    }

    /// git's own reflog message for `name` in the upper folder, cleaned.
    fn git_message(&self, name: &str) -> String {
        let msg = upper::inside(&self.common_upper, Path::new("logs").join(name))
            .map(|f| upper::reflog(&f))
            .unwrap_or_default()
            .pop()
            .map(|(_, m)| m)
            .unwrap_or_default();
        clean(&msg)
    }

    fn one_ref(
        &self,
        repo: &Repo,
        name: &str,
        after: Option<&RefVal>,
        current: Option<&str>,
        created: &mut BTreeSet<String>,
        done: &mut Brokered,
    ) {
        let before = match self.refs.get(name) {
            Some(RefVal::Oid(o)) => Some(o.as_str()),
            Some(RefVal::Sym(_)) => {
                done.refused.push((
                    name.into(),
                    "a symbolic ref is not the agent's to change".into(),
                ));
                return;
            }
            None => None,
        };
        let new = match after {
            Some(RefVal::Oid(o)) => Some(o.as_str()),
            Some(RefVal::Sym(_)) => {
                done.refused.push((
                    name.into(),
                    "made a symbolic ref, which the agent may not".into(),
                ));
                return;
            }
            None => None,
        };
        let is_branch = name.starts_with("refs/heads/");
        let verdict = if !is_branch {
            Err(
                "only branches are carried out of the sandbox (not tags, refs/replace, notes or remotes)",
            )
        } else if Some(name) == current {
            match new {
                Some(_) => Ok(false),
                None => Err("the branch this checkout is on cannot be deleted from the sandbox"),
            }
        } else if before.is_none() {
            Ok(true)
        } else {
            match self.agent_owns(name) {
                Ok(true) => Ok(false),
                Ok(false) => {
                    Err("not the branch this checkout is on, nor a branch the agent created")
                }
                Err(why) => Err(why),
            }
        };
        let creating = match verdict {
            Ok(c) => c,
            Err(why) => {
                done.refused.push((name.into(), why.into()));
                return;
            }
        };
        if let Some(n) = new
            && apply::object_type(repo, n).as_deref() != Some("commit")
        {
            done.refused.push((
                name.into(),
                format!("{n} is not a commit the repository has"),
            ));
            return;
        }
        let git = self.git_message(name);
        let msg = match creating {
            true => format!("{CREATED} ({git})"),
            false => format!("bh: the agent's bash ({git})"),
        };
        match apply::update_ref(repo, name, before, new, &msg, &self.zero) {
            Ok(()) => {
                if creating {
                    created.insert(name.to_owned());
                }
                done.applied.push((
                    name.into(),
                    before.map(str::to_owned),
                    new.map(str::to_owned),
                ));
            }
            Err(e) => done.refused.push((
                name.into(),
                format!("moved by someone else while the command ran ({e})"),
            )),
        }
    }

    fn switch_head(
        &self,
        repo: &Repo,
        after: &RefVal,
        created: &BTreeSet<String>,
        done: &mut Brokered,
    ) {
        let RefVal::Sym(target) = after else {
            done.refused.push((
                "HEAD".into(),
                "a detached HEAD is not carried out of the sandbox; switch to a branch".into(),
            ));
            return;
        };
        // A branch of the agent's, or one it switched away from before.
        let left = format!("{SWITCHED} from {target} to ");
        let own = created.contains(target)
            || (self.refs.contains_key(target) && self.agent_owns(target) == Ok(true))
            || upper::reflog(&self.git_dir.join("logs/HEAD"))
                .iter()
                .any(|(_, m)| m.starts_with(&left));
        if !target.starts_with("refs/heads/") || !own {
            done.refused.push((
                "HEAD".into(),
                format!("{target} is not a branch the agent created or came from"),
            ));
            return;
        }
        let from = match &self.head {
            Some(RefVal::Sym(b)) => b.clone(),
            Some(RefVal::Oid(o)) => o.clone(),
            None => "(nothing)".to_owned(),
        };
        let msg = format!("{SWITCHED} from {from} to {target}");
        match repo.run(["symbolic-ref", "-m", &msg, "HEAD", target]) {
            Ok(_) => done.applied.push((
                "HEAD".into(),
                match &self.head {
                    Some(RefVal::Sym(b)) => Some(format!("ref: {b}")),
                    Some(RefVal::Oid(o)) => Some(o.clone()),
                    None => None,
                },
                Some(format!("ref: {target}")),
            )),
            Err(e) => done
                .refused
                .push(("HEAD".into(), e.stderr().trim().to_owned())),
        }
    }

    fn index(&self, repo: &Repo, entries: Vec<u8>, done: &mut Brokered) {
        let real = self.git_dir.join("index");
        let now = apply::index_entries(repo, &real).unwrap_or_default();
        if now == entries {
            return;
        }
        let blobs = apply::index_blobs(&entries);
        match apply::missing(repo, &blobs) {
            Ok(m) if m.is_empty() => {}
            Ok(m) => {
                done.refused.push((
                    "the index".into(),
                    format!("names objects the repository lacks ({})", m[0]),
                ));
                return;
            }
            Err(e) => {
                done.refused.push(("the index".into(), e));
                return;
            }
        }
        match apply::install_index(repo, &self.git_dir, entries) {
            Ok(()) => done.index = true,
            Err(e) => done.refused.push(("the index".into(), e)),
        }
    }

    /// The stash as the command left it against the stash when it started;
    /// the user's own pushes and drops meanwhile (the real reflog moving
    /// under the overlay) are neither undone nor taken for the agent's.
    fn stash(&self, repo: &Repo, after: &[(String, String)], done: &mut Brokered) {
        let before = &self.stash;
        // Match the entries kept, in order; the rest of `after` is new.
        let mut kept = vec![false; before.len()];
        let mut added = Vec::new();
        let mut at = 0;
        for a in after {
            match before[at..].iter().position(|b| b == a) {
                Some(i) => {
                    kept[at + i] = true;
                    at += i + 1;
                }
                None => added.push(a.clone()),
            }
        }
        let dropped: Vec<usize> = (0..before.len()).filter(|i| !kept[*i]).collect();
        if let Some(i) = dropped.iter().find(|i| !before[**i].1.starts_with(STASHED)) {
            done.refused.push((
                format!("stash entry {}", clean(&before[*i].1)),
                "only entries the agent pushed may be dropped from the sandbox".into(),
            ));
            return;
        }
        // An entry is dropped by its position as the stash stands *now* (the
        // user may have pushed or dropped entries while the command ran):
        // found again by its commit and message, newest first counting
        // stash@{k}; one gone meanwhile is left alone.
        for i in dropped {
            let live = upper::reflog(&self.common.join("logs/refs/stash"));
            let Some(pos) = live.iter().rposition(|e| *e == before[i]) else {
                continue;
            };
            let k = live.len() - 1 - pos;
            let spec = format!("refs/stash@{{{k}}}");
            match repo.run(["reflog", "delete", "--updateref", "--rewrite", &spec]) {
                Ok(_) => done.stash.push(format!("dropped {}", clean(&before[i].1))),
                Err(e) => done.refused.push((spec, e.stderr().trim().to_owned())),
            }
        }
        if repo
            .run(["rev-parse", "--verify", "-q", "refs/stash@{0}"])
            .is_err()
        {
            let _ = repo.run(["update-ref", "-d", "refs/stash"]);
        }
        let live = upper::reflog(&self.common.join("logs/refs/stash"));
        for (oid, msg) in added {
            // Copied up after the user pushed it: the user's, not new.
            if live.iter().any(|(o, m)| *o == oid && *m == msg) {
                continue;
            }
            let msg = format!(
                "{STASHED}{}",
                clean(msg.strip_prefix(STASHED).unwrap_or(&msg))
            );
            match repo.run(["stash", "store", "-m", &msg, &oid]) {
                Ok(_) => done.stash.push(format!("pushed {msg}")),
                Err(e) => done
                    .refused
                    .push(("a stash entry".into(), e.stderr().trim().to_owned())),
            }
        }
    }
}

/// The refs of a files-backend common dir as git reads them: loose refs
/// over `packed-refs`.
fn snapshot(common: &Path) -> BTreeMap<String, RefVal> {
    let mut refs: BTreeMap<String, RefVal> = upper::packed_refs(common)
        .unwrap_or_default()
        .into_iter()
        .map(|(n, o)| (n, RefVal::Oid(o)))
        .collect();
    for (name, loose) in upper::loose_refs(common) {
        if let Loose::Value(v) = loose {
            refs.insert(name, v);
        }
    }
    refs
}

/// A message from the command's files, made safe for a reflog line.
fn clean(s: &str) -> String {
    s.chars()
        .filter(|c| !c.is_control())
        .take(120)
        .collect::<String>()
}

fn unique_folder(base: &Path) -> Result<PathBuf, String> {
    bh_fs::create_dir_all_mode(base, 0o700).map_err(|e| format!("{}: {e}", base.display()))?;
    for n in 0..1000u32 {
        let p = base.join(format!("{}-{n}", std::process::id()));
        match fs_err::create_dir(&p) {
            Ok(()) => return Ok(p),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e.to_string()),
        }
    }
    Err(format!("{}: no free folder name", base.display()))
}

/// Removes the overlay's folders (its work folder holds a 0000 folder the
/// kernel made: opened up first).
fn remove_all(p: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let mut stack = vec![p.to_path_buf()];
    while let Some(d) = stack.pop() {
        if fs_err::symlink_metadata(&d).is_ok_and(|m| m.is_dir()) {
            let _ = fs_err::set_permissions(&d, std::fs::Permissions::from_mode(0o700));
            if let Ok(entries) = fs_err::read_dir(&d) {
                stack.extend(entries.flatten().map(|e| e.path()));
            }
        }
    }
    let _ = fs_err::remove_dir_all(p);
}
