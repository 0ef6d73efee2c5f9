//! `Policy::overlays`: the command sees a writable folder whose real
//! contents never change; its writes land in the upper folder (which it
//! cannot see), and the overlay cannot be undone from inside.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use bh_sandbox::{Overlay, Policy};
use common::{policy, project, run};
use fs_err as fs;

fn overlaid(t: &std::path::Path, p: &std::path::Path) -> Policy {
    let scratch = t.join("scratch");
    fs::create_dir_all(scratch.join("upper")).unwrap();
    fs::create_dir_all(scratch.join("work")).unwrap();
    Policy {
        overlays: vec![Overlay {
            target: p.join(".git"),
            upper: scratch.join("upper"),
            work: scratch.join("work"),
        }],
        ..policy(p)
    }
}

#[test]
fn writes_to_an_overlaid_folder_land_in_upper_and_the_real_one_is_unchanged() {
    let (t, p) = project();
    let pol = overlaid(t.path(), &p);
    let r = run(
        &pol,
        &p,
        "set -e; echo '[core]\n\thooksPath = /evil' > .git/config; mkdir -p .git/hooks; \
         echo evil > .git/hooks/pre-commit; echo x > .git/index.lock; mv .git/index.lock .git/index; \
         cat .git/config; ls .git; echo a2 > a.txt",
    );
    assert_eq!(r.code, Some(0), "{}", r.out);
    assert!(r.out.contains("hooksPath"), "{}", r.out);
    // The real git dir: untouched.
    assert_eq!(
        fs::read_to_string(p.join(".git/config")).unwrap(),
        "[core]\n"
    );
    assert!(!p.join(".git/hooks").exists());
    assert!(!p.join(".git/index").exists());
    // The writes: in upper.
    let upper = t.path().join("scratch/upper");
    assert!(
        fs::read_to_string(upper.join("config"))
            .unwrap()
            .contains("hooksPath")
    );
    assert_eq!(fs::read_to_string(upper.join("index")).unwrap(), "x\n");
    // The rest of the root stays writable for real.
    assert_eq!(fs::read_to_string(p.join("a.txt")).unwrap(), "a2\n");
}

#[test]
fn the_overlay_cannot_be_removed_and_its_upper_is_not_reachable() {
    let (t, p) = project();
    let pol = overlaid(t.path(), &p);
    let upper = t.path().join("scratch/upper");
    let r = run(
        &pol,
        &p,
        &format!(
            "umount .git 2>&1; umount -l .git 2>&1; echo '[x]' > .git/config; \
             ls {u} 2>&1; echo planted > {u}/config 2>&1; echo done",
            u = upper.display()
        ),
    );
    assert!(r.out.contains("done"), "{}", r.out);
    assert_eq!(
        fs::read_to_string(p.join(".git/config")).unwrap(),
        "[core]\n"
    );
    // The upper holds the overlay's write, never a direct one.
    assert_eq!(fs::read_to_string(upper.join("config")).unwrap(), "[x]\n");
}

#[test]
fn an_overlay_folder_that_options_cannot_carry_is_refused_by_name() {
    let (t, p) = project();
    let odd = t.path().join("a,b");
    fs::create_dir_all(odd.join("upper")).unwrap();
    fs::create_dir_all(odd.join("work")).unwrap();
    let pol = Policy {
        overlays: vec![Overlay {
            target: p.join(".git"),
            upper: odd.join("upper"),
            work: odd.join("work"),
        }],
        ..policy(&p)
    };
    let err = bh_sandbox::Sandbox::new(&pol, &p)
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("cannot overlay") && err.contains("a,b"),
        "{err}"
    );
}
