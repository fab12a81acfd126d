//! Graceful shutdown: [`Shutdown`] is held by whoever stops the proxy (SIGTERM drains, SIGINT
//! stops now), [`ShutdownSignal`] tells a session that draining began, and [`finish`] gives
//! the sessions still open until the deadline, then closes them.

use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinSet;
use tracing::{info, warn};

/// The stopping side: two one-way switches. Draining stops accepting and lets each session
/// finish its command and transaction; stopping closes every session at once.
pub struct Shutdown {
    drain: watch::Sender<bool>,
    stop: watch::Sender<bool>,
}

impl Default for Shutdown {
    fn default() -> Self {
        Shutdown::new()
    }
}

impl Shutdown {
    pub fn new() -> Shutdown {
        Shutdown {
            drain: watch::channel(false).0,
            stop: watch::channel(false).0,
        }
    }

    /// Graceful: stop accepting, let sessions finish, up to the deadline.
    pub fn drain(&self) {
        self.drain.send_replace(true);
    }

    /// Fast: every session is closed now.
    pub fn stop(&self) {
        self.stop.send_replace(true);
        self.drain.send_replace(true);
    }

    /// Turns true once draining begins (the accept loop, the admin endpoint).
    pub fn draining(&self) -> watch::Receiver<bool> {
        self.drain.subscribe()
    }

    /// Turns true on a fast stop.
    pub fn stopping(&self) -> watch::Receiver<bool> {
        self.stop.subscribe()
    }
}

/// Lets sessions learn that a graceful shutdown started.
#[derive(Clone)]
pub struct ShutdownSignal(watch::Receiver<bool>);

impl ShutdownSignal {
    /// `draining`: a receiver of [`Shutdown::draining`].
    pub fn new(draining: watch::Receiver<bool>) -> ShutdownSignal {
        ShutdownSignal(draining)
    }

    /// Resolves once draining has begun (never, if the sender is gone without draining).
    pub async fn draining(&mut self) {
        if self.0.wait_for(|d| *d).await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

/// After the listener stopped accepting: waits for every session to end, up to `deadline`
/// (`server.shutdown_timeout`) or a fast stop, then aborts the rest and waits for them.
pub async fn finish(
    mut sessions: JoinSet<()>,
    deadline: Duration,
    mut stop: watch::Receiver<bool>,
) {
    info!(sessions = sessions.len(), ?deadline, "draining sessions");
    let all_done = async { while sessions.join_next().await.is_some() {} };
    tokio::select! {
        _ = all_done => {}
        _ = tokio::time::sleep(deadline) => warn!("shutdown deadline passed; closing sessions"),
        _ = stop.wait_for(|s| *s) => {}
    }
    sessions.abort_all();
    while sessions.join_next().await.is_some() {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn drain_then_deadline_closes_what_is_left() {
        let s = Shutdown::new();
        let mut signal = ShutdownSignal::new(s.draining());
        let mut sessions = JoinSet::new();
        // One session ends when draining begins, one never does on its own.
        sessions.spawn(async move { signal.draining().await });
        sessions.spawn(std::future::pending::<()>());
        s.drain();
        tokio::time::timeout(
            Duration::from_secs(5),
            finish(sessions, Duration::from_millis(20), s.stopping()),
        )
        .await
        .expect("the deadline closes a session that does not end");
    }

    #[tokio::test]
    async fn stop_does_not_wait_for_the_deadline() {
        let s = Shutdown::new();
        let mut sessions = JoinSet::new();
        sessions.spawn(std::future::pending::<()>());
        s.stop();
        tokio::time::timeout(
            Duration::from_secs(5),
            finish(sessions, Duration::from_secs(3600), s.stopping()),
        )
        .await
        .expect("a fast stop ends at once");
    }
}
