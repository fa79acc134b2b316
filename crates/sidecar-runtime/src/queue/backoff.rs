//! Per-key retry delays: client-go's `ItemExponentialFailureRateLimiter`
//! (`--retry-interval-start` doubling up to `--retry-interval-max`), computed
//! with backon. The `backoff` crate is unmaintained (RUSTSEC-2025-0012) and
//! kube-runtime moved to backon too.

use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBackoff, ExponentialBuilder};

use crate::flags::RetryArgs;

/// How failed keys are retried: the first retry after `start`, each next one
/// after twice the previous delay, never more than `max`, forever.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    pub start: Duration,
    pub max: Duration,
}

impl RetryPolicy {
    pub fn new(start: Duration, max: Duration) -> RetryPolicy {
        RetryPolicy { start, max: max.max(start) }
    }

    pub fn from_args(args: &RetryArgs) -> RetryPolicy {
        RetryPolicy::new(args.retry_interval_start, args.retry_interval_max)
    }

    /// The delays of successive failures of one key. No jitter: upstream has
    /// none, and keys fail at unrelated times anyway.
    pub fn schedule(&self) -> Schedule {
        Schedule(
            ExponentialBuilder::new()
                .with_min_delay(self.start)
                .with_max_delay(self.max)
                .with_factor(2.0)
                .without_max_times()
                .build(),
        )
    }
}

/// One key's delays. backon multiplies in `f32`, so 100 ms doubles to
/// 200.000003 ms; delays are rounded to whole microseconds to read as upstream's.
#[derive(Debug)]
pub struct Schedule(ExponentialBackoff);

impl Iterator for Schedule {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        let delay = self.0.next()?;
        let micros = (delay.as_nanos() + 500) / 1_000;
        Some(Duration::from_micros(micros.min(u128::from(u64::MAX)) as u64))
    }
}

impl Default for RetryPolicy {
    /// The upstream defaults, 1 s to 5 m.
    fn default() -> RetryPolicy {
        RetryPolicy::new(Duration::from_secs(1), Duration::from_secs(300))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_from_start_and_caps_at_max() {
        let secs = |list: &[u64]| list.iter().map(|s| Duration::from_secs(*s)).collect::<Vec<_>>();
        let cases: &[(RetryPolicy, usize, Vec<Duration>)] = &[
            (RetryPolicy::default(), 12, secs(&[1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300, 300])),
            (RetryPolicy::new(Duration::from_millis(100), Duration::from_secs(1)), 6, {
                [100, 200, 400, 800, 1000, 1000].iter().map(|ms| Duration::from_millis(*ms)).collect()
            }),
            (RetryPolicy::new(Duration::from_secs(5), Duration::from_secs(5)), 3, secs(&[5, 5, 5])),
            // A max below the start is lifted to the start rather than shrinking it.
            (RetryPolicy::new(Duration::from_secs(10), Duration::from_secs(1)), 2, secs(&[10, 10])),
        ];
        for (policy, n, expected) in cases {
            let got: Vec<Duration> = policy.schedule().take(*n).collect();
            assert_eq!(&got, expected, "{policy:?}");
        }
    }

    #[test]
    fn never_runs_out() {
        assert_eq!(RetryPolicy::default().schedule().nth(10_000), Some(Duration::from_secs(300)));
    }
}
