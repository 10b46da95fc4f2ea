//! A request to stop (Ctrl-C), shared between a signal handler and the work it stops: an apply's
//! walk, and any wait for a GKE operation ([`crate::gke::WaitOptions`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// A request to stop (Ctrl-C), shared between the signal handler and what it stops.
#[derive(Debug, Clone, Default)]
pub struct Interrupt {
    inner: Arc<InterruptInner>,
}

#[derive(Debug, Default)]
struct InterruptInner {
    set: AtomicBool,
    notify: tokio::sync::Notify,
}

impl Interrupt {
    pub fn new() -> Self {
        Self::default()
    }

    /// Asks what waits on this to stop; idempotent.
    pub fn trigger(&self) {
        self.inner.set.store(true, Ordering::SeqCst);
        self.inner.notify.notify_waiters();
    }

    pub fn is_set(&self) -> bool {
        self.inner.set.load(Ordering::SeqCst)
    }

    /// Returns once [`Interrupt::trigger`] was called (at once if it already was).
    pub async fn wait(&self) {
        loop {
            let notified = self.inner.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.is_set() {
                return;
            }
            notified.await;
        }
    }

    /// Sleeps for `delay`; `true` if interrupted meanwhile (it returns at once then).
    pub async fn sleep(interrupt: Option<&Interrupt>, delay: Duration) -> bool {
        match interrupt {
            None => {
                tokio::time::sleep(delay).await;
                false
            }
            Some(interrupt) => tokio::select! {
                _ = tokio::time::sleep(delay) => interrupt.is_set(),
                _ = interrupt.wait() => true,
            },
        }
    }
}
