//! State changes that run to their end whatever the client does.
//!
//! axum drops a handler's future when its client hangs up, at whatever
//! `.await` it was parked: a cancel that had marked its order expired but
//! not yet put the unit back would leave the unit off sale for good, a
//! reset would leave other instances selling at the old epoch. A change
//! begun in a task of its own goes on when the request's future is
//! dropped; the handler only waits for its answer. (The buy path does the
//! same in `sale::settle`.)

use std::future::Future;

use crate::backends::failure::BackendError;
use crate::model::error::ApiError;

/// Runs `change` to its end in a task of its own and answers what it
/// answered; a client that hangs up stops waiting, not the change.
pub async fn to_the_end<T, E>(
    change: impl Future<Output = Result<T, E>> + Send + 'static,
) -> Result<T, ApiError>
where
    T: Send + 'static,
    E: Into<ApiError> + Send + 'static,
{
    match tokio::spawn(change).await {
        Ok(answer) => answer.map_err(Into::into),
        Err(failed) => Err(BackendError::Task(failed.to_string()).into()),
    }
}
