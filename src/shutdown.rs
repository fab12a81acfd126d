//! Graceful shutdown: [`Shutdown`] is held by whoever stops the proxy (SIGTERM drains, SIGINT
//! stops now), [`ShutdownSignal`] tells a session that draining began, and [`finish`] gives
//! the sessions still open until the deadline, then closes them.

use std::collections::HashMap;
use std::future::poll_fn;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::Poll;
use std::time::Duration;

use futures::task::AtomicWaker;
use tokio::sync::watch;
use tokio::task::JoinSet;
use tracing::{info, warn};

/// The stopping side: two one-way switches. Draining stops accepting and lets each session
/// finish its command and transaction; stopping closes every session at once.
pub struct Shutdown {
    drain: watch::Sender<bool>,
    stop: watch::Sender<bool>,
    sessions: Signals,
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
            sessions: Signals::default(),
        }
    }

    /// Graceful: stop accepting, let sessions finish, up to the deadline.
    pub fn drain(&self) {
        self.sessions.drain();
        self.drain.send_replace(true);
    }

    /// Fast: every session is closed now.
    pub fn stop(&self) {
        self.stop.send_replace(true);
        self.sessions.drain();
        self.drain.send_replace(true);
    }

    /// Where sessions get their [`ShutdownSignal`] (the accept loop).
    pub fn signals(&self) -> Signals {
        self.sessions.clone()
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

/// The sessions' side of draining. A session polls its signal once per command, while it
/// waits for the next one; a `watch` receiver's wait took the channel's waiter lock on each
/// poll (about 400 instructions per cache hit), so each session has its own waker instead,
/// registered here once, and a poll is an atomic load and a waker comparison.
#[derive(Clone, Default)]
pub struct Signals(Arc<Drain>);

#[derive(Default)]
struct Drain {
    on: AtomicBool,
    next: AtomicU64,
    wakers: Mutex<HashMap<u64, Arc<AtomicWaker>>>,
}

impl Signals {
    /// A new session's signal (deregistered when dropped).
    pub fn session(&self) -> ShutdownSignal {
        let id = self.0.next.fetch_add(1, Ordering::Relaxed);
        let waker = Arc::new(AtomicWaker::new());
        self.0
            .wakers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id, waker.clone());
        ShutdownSignal {
            drain: self.0.clone(),
            id,
            waker,
            registered: None,
        }
    }

    fn drain(&self) {
        // The flag before the wake-ups, and each session registers its waker before it
        // reads the flag: either it sees the flag or its waker is woken.
        self.0.on.store(true, Ordering::SeqCst);
        let wakers = self.0.wakers.lock().unwrap_or_else(|e| e.into_inner());
        for w in wakers.values() {
            w.wake();
        }
    }
}

/// Lets one session learn that a graceful shutdown started.
pub struct ShutdownSignal {
    drain: Arc<Drain>,
    id: u64,
    waker: Arc<AtomicWaker>,
    /// The waker last registered in `waker`, kept here (in the session's own memory) so a
    /// poll by the same task skips the registration.
    registered: Option<std::task::Waker>,
}

impl ShutdownSignal {
    /// Resolves once draining has begun; cheap to poll again and again.
    ///
    /// A session polls this each time it waits for a command. Registering anew each time
    /// is an atomic read-modify-write on the shared `AtomicWaker`'s line, cold again by
    /// the next command with hundreds of connections (measured: a tenth of a hit's
    /// user-space time at 512 connections). The same task's waker needs no new
    /// registration: the only wake is `drain`'s, once, after the flag is set, and a task
    /// woken by it reads the flag on its next poll; a session moved to another thread
    /// has another waker and registers it.
    pub async fn draining(&mut self) {
        poll_fn(|cx| {
            if !self
                .registered
                .as_ref()
                .is_some_and(|w| w.will_wake(cx.waker()))
            {
                self.waker.register(cx.waker());
                self.registered = Some(cx.waker().clone());
            }
            if self.drain.on.load(Ordering::SeqCst) {
                Poll::Ready(())
            } else {
                Poll::Pending
            }
        })
        .await
    }
}

impl Drop for ShutdownSignal {
    fn drop(&mut self) {
        let mut wakers = self.drain.wakers.lock().unwrap_or_else(|e| e.into_inner());
        wakers.remove(&self.id);
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

    /// A session polls its signal once per command: the waker it registered first is the
    /// one a drain wakes, however many polls skipped registering it again.
    #[test]
    fn a_signal_polled_many_times_is_woken_once_draining() {
        use std::future::Future;
        use std::sync::atomic::AtomicUsize;
        use std::task::{Context, Wake, Waker};
        struct Count(AtomicUsize);
        impl Wake for Count {
            fn wake(self: Arc<Self>) {
                self.0.fetch_add(1, Ordering::SeqCst);
            }
        }
        let s = Shutdown::new();
        let mut signal = s.signals().session();
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(count.clone());
        let mut cx = Context::from_waker(&waker);
        let mut fut = Box::pin(signal.draining());
        for _ in 0..3 {
            assert!(fut.as_mut().poll(&mut cx).is_pending());
        }
        assert_eq!(count.0.load(Ordering::SeqCst), 0);
        s.drain();
        assert_eq!(count.0.load(Ordering::SeqCst), 1, "woken by the drain");
        assert!(fut.as_mut().poll(&mut cx).is_ready());
    }

    #[tokio::test]
    async fn drain_then_deadline_closes_what_is_left() {
        let s = Shutdown::new();
        let mut signal = s.signals().session();
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
    async fn every_waiting_session_wakes_and_ends_deregister() {
        let s = Shutdown::new();
        let signals = s.signals();
        let mut sessions = JoinSet::new();
        for _ in 0..10 {
            let mut signal = signals.session();
            sessions.spawn(async move { signal.draining().await });
        }
        tokio::task::yield_now().await;
        s.drain();
        tokio::time::timeout(Duration::from_secs(5), async {
            while sessions.join_next().await.is_some() {}
        })
        .await
        .expect("every session saw the drain");
        assert!(signals.0.wakers.lock().unwrap().is_empty());
        // A session that starts after the drain sees it at once.
        let mut late = signals.session();
        tokio::time::timeout(Duration::from_secs(1), late.draining())
            .await
            .expect("already draining");
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

    /// Draining turns the drain switch only; a fast stop turns both, and drains the
    /// sessions too.
    #[test]
    fn drain_and_stop_switches() {
        use futures::FutureExt;
        for (fast, stopping) in [(false, false), (true, true)] {
            let s = Shutdown::new();
            let (drain, stop) = (s.draining(), s.stopping());
            let mut session = s.signals().session();
            assert!(!*drain.borrow() && !*stop.borrow());
            assert!(session.draining().now_or_never().is_none());
            if fast {
                s.stop();
            } else {
                s.drain();
            }
            assert!(*drain.borrow(), "fast={fast}");
            assert_eq!(*stop.borrow(), stopping, "fast={fast}");
            assert!(session.draining().now_or_never().is_some(), "fast={fast}");
        }
    }
}
