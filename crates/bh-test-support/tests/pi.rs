//! The shared real-Pi installer gives a Pi that runs and reports the release
//! asked for (the 1.x one on a Node it supports).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use bh_test_support::pi::{PiRelease, real_pi};

#[test]
fn each_release_installs_and_reports_its_version() {
    for release in [PiRelease::Legacy, PiRelease::Current] {
        let Some(pi) = real_pi(release) else {
            return;
        };
        let scratch = tempfile::tempdir().unwrap();
        let out = pi
            .command(scratch.path())
            .arg("--version")
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.status.success(), "{release:?}: {text}");
        assert!(text.contains(release.version()), "{release:?}: {text}");
    }
}
