//! [`Timer`]: the one timer every part of a call runs on (the call's deadline, an
//! attempt's timeout, a backoff, a stream's gap). What it waits for is always a
//! [`Due`](crate::policy::deadline::Due) or a plain instant handed to
//! [`Timer::poll_until`]; the timer itself only knows *when*.

use std::future::Future;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use pin_project_lite::pin_project;
use tokio::time::{Instant, Sleep};

pin_project! {
    /// A timer armed lazily, at the first poll that has to wait: a call answered at
    /// once never creates one (creating and dropping a `Sleep` costs a runtime handle
    /// and the timer driver's lock).
    #[derive(Debug, Default)]
    pub(crate) struct Timer {
        #[pin]
        sleep: Option<Sleep>,
    }
}

impl Timer {
    /// An unarmed timer.
    #[inline]
    pub(crate) fn new() -> Self {
        Timer { sleep: None }
    }

    /// Ready once `at` has passed. `at` may move between polls: earlier re-arms the
    /// timer at once; later is noticed when the timer fires early and re-arms it, so a
    /// deadline pushed back on every message (a stream's gap) costs a clock read per
    /// poll, not timer-driver work.
    pub(crate) fn poll_until(self: Pin<&mut Self>, at: Instant, cx: &mut Context<'_>) -> Poll<()> {
        let mut sleep = self.project().sleep;
        match sleep.as_mut().as_pin_mut() {
            None => sleep.set(Some(tokio::time::sleep_until(at))),
            Some(s) if s.deadline() > at => s.reset(at),
            Some(_) => {}
        }
        let Some(mut s) = sleep.as_pin_mut() else {
            return Poll::Pending;
        };
        loop {
            ready!(s.as_mut().poll(cx));
            if Instant::now() >= at {
                return Poll::Ready(());
            }
            s.as_mut().reset(at);
        }
    }

    /// Disarms the timer (its registration with the driver goes with it).
    #[inline]
    pub(crate) fn clear(self: Pin<&mut Self>) {
        self.project().sleep.set(None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test(start_paused = true)]
    async fn fires_at_the_instant_even_when_it_moves() {
        let start = Instant::now();
        let mut timer = std::pin::pin!(Timer::new());
        // Moved later after arming: fires at the later instant, not the first.
        let first = start + Duration::from_millis(100);
        let later = start + Duration::from_millis(250);
        std::future::poll_fn(|cx| {
            assert!(timer.as_mut().poll_until(first, cx).is_pending());
            Poll::Ready(())
        })
        .await;
        std::future::poll_fn(|cx| timer.as_mut().poll_until(later, cx)).await;
        assert_eq!(start.elapsed(), Duration::from_millis(250));
        // Moved earlier: fires at the earlier instant.
        let soon = Instant::now() + Duration::from_millis(40);
        std::future::poll_fn(|cx| {
            assert!(timer
                .as_mut()
                .poll_until(soon + Duration::from_secs(9), cx)
                .is_pending());
            Poll::Ready(())
        })
        .await;
        std::future::poll_fn(|cx| timer.as_mut().poll_until(soon, cx)).await;
        assert_eq!(start.elapsed(), Duration::from_millis(290));
        timer.as_mut().clear();
        assert!(timer.sleep.is_none());
    }
}
