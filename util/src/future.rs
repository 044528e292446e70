//! [`FutureExt`]: tokio-util's methods for every future, with the timeouts on Volt's
//! timer.

use std::future::Future;
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use volt::time::{Instant, Timeout};

/// Methods for every future, as tokio-util's `FutureExt` has them.
pub trait FutureExt: Future {
    /// This future, or [`Elapsed`](volt::time::error::Elapsed) once `timeout` passes
    /// first (Volt's `time::timeout`).
    #[track_caller]
    fn timeout(self, timeout: Duration) -> Timeout<Self>
    where
        Self: Sized,
    {
        volt::time::timeout(timeout, self)
    }

    /// This future, or [`Elapsed`](volt::time::error::Elapsed) at `deadline` if it comes
    /// first (Volt's `time::timeout_at`).
    #[track_caller]
    fn timeout_at(self, deadline: Instant) -> Timeout<Self>
    where
        Self: Sized,
    {
        volt::time::timeout_at(deadline, self)
    }

    /// This future's output, or `None` once `cancellation_token` is cancelled first.
    fn with_cancellation_token(
        self,
        cancellation_token: &CancellationToken,
    ) -> impl Future<Output = Option<Self::Output>>
    where
        Self: Sized,
    {
        tokio_util::future::FutureExt::with_cancellation_token(self, cancellation_token)
    }

    /// [`with_cancellation_token`](FutureExt::with_cancellation_token), owning the token.
    fn with_cancellation_token_owned(
        self,
        cancellation_token: CancellationToken,
    ) -> impl Future<Output = Option<Self::Output>>
    where
        Self: Sized,
    {
        tokio_util::future::FutureExt::with_cancellation_token_owned(self, cancellation_token)
    }
}

impl<F: Future + ?Sized> FutureExt for F {}
