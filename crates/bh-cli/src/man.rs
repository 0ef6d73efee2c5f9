//! `bh man [COMMAND…]`: the manual page of `bh` or of one of its
//! subcommands (`bh man exec run` is bh-exec-run(1)), each page one
//! `bh-…(1)` its parent's SUBCOMMANDS section names, with the exit codes as
//! an EXIT STATUS section of their own (not the `--help` table, which `man`
//! would re-wrap).

use crate::error::{self, CliError, ErrorKind};

/// Renders the page of `path` (empty: `bh` itself) of `root` to stdout.
pub(crate) fn run(root: clap::Command, path: &[String]) -> Result<(), CliError> {
    // Every page says which bh it documents (a subcommand has no version of its own).
    let version = root.get_version().unwrap_or("").to_owned();
    let mut cmd = root;
    let mut name = String::from("bh");
    // The command as typed (`bh checkpoint hook claude-code`): not derivable
    // from the page name, whose `-` joins words that may hold `-` themselves.
    let mut typed = String::from("bh");
    let mut executor = false;
    for word in path {
        let Some(sub) = cmd.find_subcommand(word).cloned() else {
            let known: Vec<String> = cmd
                .get_subcommands()
                .filter(|s| s.get_name() != "help")
                .map(|s| s.get_name().to_owned())
                .collect();
            return Err(CliError::new(
                ErrorKind::Usage,
                if known.is_empty() {
                    format!("{name} has no subcommands (no page {name}-{word}(1))")
                } else {
                    format!(
                        "{name} has no subcommand {word:?}; its pages: {}",
                        known
                            .iter()
                            .map(|k| format!("{name}-{k}(1)"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                },
            ));
        };
        executor |= sub.get_name() == "exec";
        name = format!("{name}-{}", sub.get_name());
        typed = format!("{typed} {}", sub.get_name());
        cmd = sub;
    }
    // The page's name is its `bh-…` name; the synopsis shows the command as
    // typed. (The `--help` exit-code table is not rendered: EXIT STATUS is.)
    let cmd = cmd
        .name(name.clone())
        .bin_name(typed)
        .version(version)
        // `help` has no page of its own: not listed.
        .disable_help_subcommand(true);
    let man = clap_mangen::Man::new(cmd.clone());
    let mut page = Vec::new();
    let roff = |e: std::io::Error| CliError::internal(format!("cannot render {name}(1): {e}"));
    man.render_title(&mut page).map_err(roff)?;
    man.render_name_section(&mut page).map_err(roff)?;
    man.render_synopsis_section(&mut page).map_err(roff)?;
    man.render_description_section(&mut page).map_err(roff)?;
    if cmd.get_arguments().any(|a| !a.is_hide_set()) {
        man.render_options_section(&mut page).map_err(roff)?;
    }
    if cmd.has_subcommands() {
        man.render_subcommands_section(&mut page).map_err(roff)?;
        let mut words = vec!["bh man"];
        words.extend(path.iter().map(String::as_str));
        page.extend_from_slice(
            format!(
                ".PP\nEach of these pages: \\fB{} SUBCOMMAND\\fR.\n",
                words.join(" ")
            )
            .as_bytes(),
        );
    }
    page.extend_from_slice(exit_status(executor).as_bytes());
    man.render_version_section(&mut page).map_err(roff)?;
    crate::ui::write_bytes(&page)?;
    Ok(())
}

/// The EXIT STATUS section: one tagged paragraph per code.
fn exit_status(executor: bool) -> String {
    let mut t = String::from(".SH \"EXIT STATUS\"\n");
    for (code, meaning) in error::exit_code_rows(executor) {
        t.push_str(&format!(".TP\n\\fB{code}\\fR\n{}\n", roff_text(&meaning)));
    }
    t
}

/// Text as a roff line: backslashes and a leading dot or quote escaped,
/// `-` as a real minus where it is an option's.
fn roff_text(text: &str) -> String {
    let t = text
        .replace('\\', "\\\\")
        .replace('-', "\\-")
        .replace('\'', "\\(aq");
    if t.starts_with('.') {
        format!("\\&{t}")
    } else {
        t
    }
}
