//! A timer as precise as the kernel's, for the proxy's delay line.
//!
//! Tokio's timer counts in whole milliseconds and rounds every deadline
//! up to the next tick, even one already past: through the proxy, a PING
//! on loopback took 2.3 ms in `Pass` (about 1.1 ms per crossing, for a
//! delay of 0) and 6.4 ms with 2 ms each way (4 ms asked). Worse, the
//! error depends on when the runtime wakes, so a link carrying little
//! traffic was slower than the same link busy, and a scenario that
//! compares two loads on one "2 ms" link compared two different links.
//! A `timerfd` wakes the reactor through epoll when the kernel's
//! high-resolution timer fires: microseconds late, not milliseconds.

use std::io;
use std::os::fd::{AsFd, AsRawFd, RawFd};
use std::time::Instant;

use nix::sys::time::TimeSpec;
use nix::sys::timerfd::{ClockId, Expiration, TimerFd, TimerFlags, TimerSetTimeFlags};
use tokio::io::Interest;
use tokio::io::unix::AsyncFd;

/// One timer, re-armed for each deadline; created on first use, so a
/// link that is never delayed holds no extra descriptor.
#[derive(Default)]
pub struct Timer {
    fd: Option<AsyncFd<Fd>>,
}

/// The timer's descriptor, as tokio's reactor takes it.
struct Fd(TimerFd);

impl AsRawFd for Fd {
    fn as_raw_fd(&self) -> RawFd {
        self.0.as_fd().as_raw_fd()
    }
}

impl Fd {
    /// A non-blocking timer on the monotonic clock (the one [`Instant`]
    /// reads), registered with the current runtime's reactor.
    #[allow(unsafe_code)]
    fn register() -> io::Result<AsyncFd<Self>> {
        let timer = TimerFd::new(
            ClockId::CLOCK_MONOTONIC,
            TimerFlags::TFD_NONBLOCK | TimerFlags::TFD_CLOEXEC,
        )?;
        // SAFETY: the descriptor is the `TimerFd`'s own `OwnedFd`, open
        // until the `Fd` (owned by the `AsyncFd`) is dropped, and
        // `as_raw_fd` returns that same descriptor every time.
        unsafe { AsyncFd::register_with_interest(Self(timer), Interest::READABLE) }
            .map_err(|e| e.into_parts().1)
    }
}

impl Timer {
    /// Returns at `due`, or at once if it is past. Cancel-safe: a
    /// cancelled wait leaves the timer armed, and the next wait re-arms it
    /// (which also clears an expiry nobody read).
    pub async fn until(&mut self, due: Instant) -> io::Result<()> {
        loop {
            let left = due.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(());
            }
            let fd = match &mut self.fd {
                Some(fd) => fd,
                None => self.fd.insert(Fd::register()?),
            };
            fd.get_ref().0.set(
                Expiration::OneShot(TimeSpec::from_duration(left)),
                TimerSetTimeFlags::empty(),
            )?;
            let mut ready = fd.readable().await?;
            // Readiness may be stale (an expiry of an earlier deadline):
            // only a read that returns says this one fired, and the loop
            // checks the clock either way.
            let _ = ready.try_io(|fd| fd.get_ref().0.wait().map_err(io::Error::from));
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// A wait, the short one every chunk of a delayed link makes.
    const WAIT: Duration = Duration::from_micros(300);

    /// The median of how late each wait ended.
    fn median(mut late: Vec<Duration>) -> Duration {
        late.sort();
        late[late.len() / 2]
    }

    /// Past deadlines return at once, a wait cancelled midway does not
    /// spoil the next, and a deadline is kept far closer than tokio's
    /// timer keeps it on the same runtime, in the same moment (a ratio,
    /// not a time: the machine's noise hits both alike). From the
    /// mechanism, tokio's median is about half a tick late (0.5 ms) and
    /// the timerfd's the reactor's wake-up (tens of µs).
    #[tokio::test]
    async fn deadlines_are_kept_closer_than_tokio_keeps_them() {
        let mut timer = Timer::default();
        timer.until(Instant::now()).await.expect("a past deadline");
        let cancelled = tokio::time::timeout(
            Duration::from_millis(1),
            timer.until(Instant::now() + Duration::from_secs(5)),
        );
        assert!(cancelled.await.is_err(), "the long wait was cut short");

        let (mut ours, mut tokios) = (Vec::new(), Vec::new());
        for _ in 0..50 {
            let due = Instant::now() + WAIT;
            timer.until(due).await.expect("a wait");
            ours.push(due.elapsed());
            let due = Instant::now() + WAIT;
            tokio::time::sleep_until(due.into()).await;
            tokios.push(due.elapsed());
        }
        let (ours, tokios) = (median(ours), median(tokios));
        assert!(
            ours * 2 < tokios,
            "a {WAIT:?} wait: {ours:?} late here, {tokios:?} with tokio's timer"
        );
    }
}
