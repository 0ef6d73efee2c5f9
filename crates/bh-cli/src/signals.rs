//! The one place `bh` listens for the signals that ask it to stop: SIGINT
//! (Ctrl-C), SIGTERM (a scheduler's preemption, `kill`) and SIGHUP (the
//! terminal went away). Every long command (`bh agent`, `exec run`, `task
//! run`, `demo`) cancels on the first one the same way, so a `kill` leaves
//! what a Ctrl-C leaves: the run ends through its own cancellation path (the
//! session, the worktree, the task state recorded), never mid-write.
//!
//! Tokio's handlers replace the default action for the life of the process:
//! once installed, these signals no longer kill `bh`; what a second one does
//! is the command's choice (the agent's second Ctrl-C exits).

use tokio::signal::unix::{Signal, SignalKind, signal};

/// Which signal asked to stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// SIGINT: Ctrl-C at the terminal.
    Interrupt,
    /// SIGTERM: a scheduler's preemption or `kill`.
    Terminate,
    /// SIGHUP: the terminal closed.
    Hangup,
}

/// The stop signals, caught. Created inside a Tokio runtime with I/O
/// enabled; a signal that cannot be registered is simply not listened to
/// (its default action stays).
pub struct StopSignals {
    int: Option<Signal>,
    term: Option<Signal>,
    hup: Option<Signal>,
}

impl StopSignals {
    pub fn catch() -> StopSignals {
        StopSignals {
            int: signal(SignalKind::interrupt()).ok(),
            term: signal(SignalKind::terminate()).ok(),
            hup: signal(SignalKind::hangup()).ok(),
        }
    }

    /// The next stop signal (pending forever when none could be registered).
    pub async fn recv(&mut self) -> Stop {
        async fn one(sig: &mut Option<Signal>) {
            match sig {
                Some(s) => {
                    if s.recv().await.is_none() {
                        std::future::pending::<()>().await;
                    }
                }
                None => std::future::pending().await,
            }
        }
        tokio::select! {
            () = one(&mut self.int) => Stop::Interrupt,
            () = one(&mut self.term) => Stop::Terminate,
            () = one(&mut self.hup) => Stop::Hangup,
        }
    }
}

/// For a command that is not async: the stop signals caught now (before
/// this returns), and `on_stop` called once, on a helper thread, at the
/// first one; later ones are caught and ignored.
pub fn on_first_stop(on_stop: impl FnOnce(Stop) + Send + 'static) {
    let Ok(rt) = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()
    else {
        return;
    };
    let mut signals = {
        let _in_rt = rt.enter();
        StopSignals::catch()
    };
    std::thread::spawn(move || {
        // Tokio's handler stays installed after this: later signals are
        // caught and ignored, never the default kill.
        on_stop(rt.block_on(signals.recv()));
    });
}

/// Inside a runtime: `cancel` fires at the first stop signal (the handlers
/// are installed before this returns); the task ends with the signal's kind.
/// Later signals are caught and ignored.
pub fn cancel_on_stop(
    cancel: tokio_util::sync::CancellationToken,
) -> tokio::task::JoinHandle<Stop> {
    let mut signals = StopSignals::catch();
    tokio::spawn(async move {
        let stop = signals.recv().await;
        cancel.cancel();
        stop
    })
}
