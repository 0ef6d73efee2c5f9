//! Seeding an empty shadow from the user's own repository: their objects and
//! their index (see [`Store::seed`]).

use fs_err as fs;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use bh_git::parse;

use crate::error::Result;
use crate::meta::Skipped;
use crate::snapshot::{OnProgress, SnapshotProgress, nul_join};
use crate::store::{Store, trim_line};

impl Store {
    /// Seeds an empty shadow from the user's own repository: their objects
    /// (hard-linked, else copied — never borrowed through alternates, so their
    /// `gc` cannot break a checkpoint) and their index, whose stat data lets the
    /// first snapshot skip re-hashing every unchanged file. Entries whose bytes
    /// the user's git converts (attributes, autocrlf) are dropped from the seed
    /// so they are re-read raw. Returns `None` when seeding does not apply.
    pub(crate) fn seed(&self, progress: OnProgress<'_>) -> Result<Option<Vec<Skipped>>> {
        let Some(user) = &self.user else {
            return Ok(None);
        };
        if !user.is_top || !user.index.is_file() {
            return Ok(None);
        }
        let get = |key: &str| -> Option<String> {
            let out = user
                .repo
                .cmd(["config", "--get", key])
                .ok_codes(&[0, 1])
                .run()
                .ok()?;
            Some(String::from_utf8_lossy(trim_line(&out.stdout)).to_lowercase())
        };
        let autocrlf = get("core.autocrlf").unwrap_or_default();
        if autocrlf == "true" || autocrlf == "input" {
            return Ok(None);
        }
        if get("index.sparse").as_deref() == Some("true")
            || get("core.splitindex").as_deref() == Some("true")
            || has_shared_index(&user.git_dir)
        {
            return Ok(None);
        }
        // Seeding from here on (said only now: any guard above declines it).
        progress(SnapshotProgress::Seeding);
        link_objects(
            &user.common_dir.join("objects"),
            &self.git_dir.join("objects"),
        );
        let index = self.git_dir.join("index");
        let tmp = self.git_dir.join("index.seed.tmp");
        if fs::copy(&user.index, &tmp).is_err() || fs::rename(&tmp, &index).is_err() {
            let _ = fs::remove_file(&tmp);
            return Ok(None);
        }
        let shadow = self.shadow();
        // Compare status against the user's HEAD, so only their real changes show.
        if let Ok(head) = user
            .repo
            .run_line(["rev-parse", "--verify", "--quiet", "HEAD^{commit}"])
            && !head.is_empty()
            && shadow.run(["cat-file", "-e", &head]).is_ok()
        {
            shadow.run(["update-ref", "refs/heads/bh-base", &head])?;
        }
        let listing = shadow.run(["ls-files", "-z", "-s", "-v"])?;
        let mut gitlinks = Vec::new();
        let mut assumed = Vec::new();
        let mut skip_worktree = Vec::new();
        let mut all_paths = Vec::new();
        for rec in parse::split_z(&listing) {
            // "<tag> <mode> <oid> <stage>\t<path>"
            let Some(tab) = rec.iter().position(|b| *b == b'\t') else {
                continue;
            };
            let (meta, path) = (&rec[..tab], &rec[tab + 1..]);
            let tag = meta.first().copied().unwrap_or(b'H');
            if meta.get(2..8) == Some(b"160000") {
                gitlinks.push(path);
                continue;
            }
            if tag == b'S' || tag == b's' {
                skip_worktree.push(path);
            }
            if tag.is_ascii_lowercase() {
                assumed.push(path);
            }
            all_paths.push(path);
        }
        let mut skipped = Vec::new();
        let mut drop: Vec<&[u8]> = gitlinks.clone();
        for g in &gitlinks {
            skipped.push(Skipped {
                path: parse::display_path(g),
                reason: "nested repository (submodule)".into(),
            });
        }
        let has_attribute_files = all_paths
            .iter()
            .any(|p| *p == b".gitattributes" || p.ends_with(b"/.gitattributes"));
        if has_attribute_files || self.user_has_global_attributes(user) {
            drop.extend(self.converted_paths(user, &all_paths)?);
        }
        if !drop.is_empty() {
            shadow
                .cmd(["update-index", "-z", "--force-remove", "--stdin"])
                .stdin(nul_join(&drop))
                .run()?;
        }
        if !assumed.is_empty() {
            shadow
                .cmd(["update-index", "-z", "--no-assume-unchanged", "--stdin"])
                .stdin(nul_join(&assumed))
                .run()?;
        }
        if !skip_worktree.is_empty() {
            shadow
                .cmd(["update-index", "-z", "--no-skip-worktree", "--stdin"])
                .stdin(nul_join(&skip_worktree))
                .run()?;
        }
        Ok(Some(skipped))
    }

    /// Whether every object `tree` reaches is in the shadow (a seeded index
    /// may name objects a concurrent `gc` of the user's repository moved
    /// away while they were linked). Also `false` when git cannot tell.
    pub(crate) fn seeded_tree_is_whole(&self, tree: &str) -> bool {
        match self
            .shadow()
            .run(["rev-list", "--objects", "--missing=print", tree])
        {
            Ok(out) => !out.split(|b| *b == b'\n').any(|l| l.first() == Some(&b'?')),
            Err(_) => false,
        }
    }

    /// Whether attributes could come from outside the work tree: the
    /// repository's `info/attributes`, `core.attributesFile`, or the default
    /// `$XDG_CONFIG_HOME/git/attributes` (`~/.config/git/attributes`).
    fn user_has_global_attributes(&self, user: &crate::user::UserRepo) -> bool {
        let non_empty = |p: &Path| fs::metadata(p).map(|m| m.len() > 0).unwrap_or(false);
        if non_empty(&user.common_dir.join("info/attributes")) {
            return true;
        }
        let configured = user
            .repo
            .cmd(["config", "--path", "--get", "core.attributesFile"])
            .ok_codes(&[0, 1])
            .run()
            .map(|o| !trim_line(&o.stdout).is_empty())
            .unwrap_or(true);
        if configured {
            return true;
        }
        let xdg = self
            .runner
            .env_var("XDG_CONFIG_HOME")
            .filter(|v| !v.is_empty())
            .map(std::path::PathBuf::from)
            .or_else(|| {
                self.runner
                    .env_var("HOME")
                    .map(|h| Path::new(h).join(".config"))
            });
        // Without a known home, assume the worst and check.
        xdg.is_none_or(|dir| fs::metadata(dir.join("git/attributes")).is_ok())
    }

    /// Paths whose stored bytes the user's git may convert (text/eol/crlf,
    /// filters, ident, working-tree-encoding), as the user's own attributes say.
    fn converted_paths<'a>(
        &self,
        user: &crate::user::UserRepo,
        paths: &[&'a [u8]],
    ) -> Result<Vec<&'a [u8]>> {
        if paths.is_empty() {
            return Ok(Vec::new());
        }
        let out = user
            .repo
            .cmd([
                "check-attr",
                "-z",
                "--stdin",
                "text",
                "eol",
                "crlf",
                "filter",
                "ident",
                "working-tree-encoding",
            ])
            .stdin(nul_join(paths))
            .run()?;
        let mut converted = std::collections::HashSet::new();
        let mut fields = parse::split_z(&out.stdout);
        while let (Some(path), Some(_attr), Some(value)) =
            (fields.next(), fields.next(), fields.next())
        {
            if value != b"unspecified" && value != b"unset" {
                converted.insert(path);
            }
        }
        Ok(paths
            .iter()
            .copied()
            .filter(|p| converted.contains(p))
            .collect())
    }
}

fn has_shared_index(git_dir: &Path) -> bool {
    fs::read_dir(git_dir)
        .map(|rd| {
            rd.flatten()
                .any(|e| e.file_name().as_bytes().starts_with(b"sharedindex."))
        })
        .unwrap_or(false)
}

/// Hard-links (or copies, across file systems) the user's loose objects and
/// packs into the shadow. Objects are immutable, so a link shares bytes with
/// the user's store without ever depending on it: their `gc` removes only
/// their own name for the file.
///
/// A `git gc --auto` (or `repack`, `prune`) the user's git runs meanwhile
/// moves objects: loose ones into a new pack, old packs into a new one. So
/// loose objects go first (a gc then packs them into a pack that appears
/// before they are deleted), then the packs, and the pack folder is listed
/// again until a pass finds no pack it has not linked (bounded). What still
/// went missing is caught by the connectivity check after the seeded
/// snapshot's tree is written ([`Store::seeded_tree_is_whole`]).
fn link_objects(from: &Path, to: &Path) {
    link_loose(from, to);
    let mut linked: std::collections::HashSet<std::ffi::OsString> =
        std::collections::HashSet::new();
    for _ in 0..8 {
        if !link_packs(from, to, &mut linked) {
            break;
        }
        // Loose objects written meanwhile (by an interrupted repack's
        // unpacking, or by the user's git) are linked once more.
        link_loose(from, to);
    }
}

fn link(src: &Path, dst: &Path) -> bool {
    if dst.exists() {
        return true;
    }
    fs::hard_link(src, dst).is_ok() || fs::copy(src, dst).is_ok()
}

/// Links the packs not linked yet; whether any new one was found.
fn link_packs(
    from: &Path,
    to: &Path,
    linked: &mut std::collections::HashSet<std::ffi::OsString>,
) -> bool {
    let Ok(packs) = fs::read_dir(from.join("pack")) else {
        return false;
    };
    let _ = fs::create_dir_all(to.join("pack"));
    let mut names: Vec<_> = packs
        .flatten()
        .map(|e| e.file_name())
        .filter(|n| {
            let b = n.as_bytes();
            (b.ends_with(b".pack") || b.ends_with(b".idx")) && !linked.contains(n)
        })
        .collect();
    // Index after pack, so a reader never sees an index without its pack.
    names.sort_by_key(|n| n.as_bytes().ends_with(b".idx"));
    let mut found = false;
    for name in names {
        let src = from.join("pack").join(&name);
        let dst = to.join("pack").join(&name);
        if name.as_bytes().ends_with(b".idx") {
            // An index whose pack we lack would name objects we do not have.
            let pack = dst.with_extension("pack");
            if !pack.exists() {
                continue;
            }
        }
        if link(&src, &dst) {
            found = true;
            linked.insert(name);
        }
    }
    found
}

fn link_loose(from: &Path, to: &Path) {
    let Ok(dirs) = fs::read_dir(from) else {
        return;
    };
    let fanout: Vec<std::path::PathBuf> = dirs
        .flatten()
        .filter(|d| {
            let name = d.file_name();
            let b = name.as_bytes();
            b.len() == 2 && b.iter().all(|c| c.is_ascii_hexdigit())
        })
        .map(|d| d.path())
        .collect();
    // Loose objects are one file each: link the 256 fan-out folders in parallel.
    let workers = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .clamp(1, 4);
    let next = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some(dir) = fanout.get(i) else { break };
                    let Ok(objects) = fs::read_dir(dir) else {
                        continue;
                    };
                    let Some(name) = dir.file_name() else {
                        continue;
                    };
                    let target = to.join(name);
                    let _ = fs::create_dir_all(&target);
                    for obj in objects.flatten() {
                        link(&obj.path(), &target.join(obj.file_name()));
                    }
                }
            });
        }
    });
}
