//! Client-side rate limiting of Kubernetes API requests, as client-go's token
//! bucket (`--kube-api-qps`, `--kube-api-burst`): up to `burst` requests at
//! once, refilled at `qps` per second. kube-rs has no such limiter; this is a
//! tower layer for `kube::client::ClientBuilder::with_layer`.
//!
//! Beyond client-go: a bucket serves two priorities. Clients made from
//! [`RateLimitLayer::background`] (the event sender's) take a token only while
//! no request of the work's client waits for one, and never the last half of
//! the burst, so that events never delay a sidecar's own writes: a burst of
//! work (a StatefulSet's claims arriving at once) finds half the burst still
//! there even when each item's first event went out just before. Upstream's
//! events come from one goroutine, one request at a time, which leaves the
//! burst to the work in much the same way.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use tokio::time::{Instant, Sleep};
use tower::{Layer, Service};

/// The bucket itself, without clocks of its own.
#[derive(Debug, Clone)]
pub struct TokenBucket {
    qps: f64,
    burst: f64,
    tokens: f64,
    refilled_at: Instant,
}

impl TokenBucket {
    /// A full bucket. A burst of 0 is taken as 1: nothing could ever pass otherwise.
    pub fn new(qps: f64, burst: u32, now: Instant) -> TokenBucket {
        let burst = f64::from(burst.max(1));
        TokenBucket { qps, burst, tokens: burst, refilled_at: now }
    }

    /// Takes a token, or says how long until one is available.
    pub fn take(&mut self, now: Instant) -> Result<(), Duration> {
        self.take_keeping(0.0, now)
    }

    /// Takes a token only if `reserve` tokens are left after it, or says how long until that is so.
    pub fn take_keeping(&mut self, reserve: f64, now: Instant) -> Result<(), Duration> {
        let elapsed = now.saturating_duration_since(self.refilled_at).as_secs_f64();
        self.tokens = (self.tokens + elapsed * self.qps).min(self.burst);
        self.refilled_at = now;
        let needed = 1.0 + reserve.min(self.burst - 1.0);
        if self.tokens >= needed {
            self.tokens -= 1.0;
            Ok(())
        } else {
            Err(Duration::from_secs_f64((needed - self.tokens) / self.qps))
        }
    }

    /// The tokens a background request leaves for work: half the burst, rounded down.
    fn background_reserve(&self) -> f64 {
        (self.burst / 2.0).floor()
    }
}

/// Which requests go first when both wait for a token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Priority {
    /// The sidecar's own reads and writes.
    Work,
    /// Requests nobody waits for (events): only when no work request waits.
    Background,
}

/// One bucket and how many work requests wait for it.
#[derive(Debug)]
struct SharedBucket {
    bucket: Mutex<TokenBucket>,
    work_waiting: AtomicUsize,
    /// How long a background request waits before looking again while work waits.
    period: Duration,
}

impl SharedBucket {
    fn take(&self, priority: Priority) -> Result<(), Duration> {
        let mut bucket = self.bucket.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        match priority {
            Priority::Work => bucket.take(Instant::now()),
            Priority::Background => {
                let reserve = bucket.background_reserve();
                bucket.take_keeping(reserve, Instant::now())
            }
        }
    }
}

/// Limits the wrapped service to `qps` requests per second with bursts of
/// `burst`. All services made by one layer (and by its [`RateLimitLayer::background`]
/// twin) share one bucket.
#[derive(Debug, Clone)]
pub struct RateLimitLayer {
    bucket: Option<Arc<SharedBucket>>,
    priority: Priority,
}

impl RateLimitLayer {
    /// client-go's rules: a QPS of 0 means the default of 5, a negative QPS
    /// means no limit.
    pub fn new(qps: f32, burst: u32) -> RateLimitLayer {
        let qps = if qps == 0.0 { 5.0 } else { f64::from(qps) };
        let bucket = (qps > 0.0).then(|| {
            Arc::new(SharedBucket {
                bucket: Mutex::new(TokenBucket::new(qps, burst, Instant::now())),
                work_waiting: AtomicUsize::new(0),
                period: Duration::from_secs_f64(1.0 / qps),
            })
        });
        RateLimitLayer { bucket, priority: Priority::Work }
    }

    /// A layer on the same bucket whose requests yield to this one's.
    pub fn background(&self) -> RateLimitLayer {
        RateLimitLayer { bucket: self.bucket.clone(), priority: Priority::Background }
    }

    pub fn is_unlimited(&self) -> bool {
        self.bucket.is_none()
    }
}

impl<S> Layer<S> for RateLimitLayer {
    type Service = RateLimited<S>;

    fn layer(&self, inner: S) -> RateLimited<S> {
        RateLimited {
            inner,
            bucket: self.bucket.clone(),
            priority: self.priority,
            waiting: None,
            holds_token: false,
            counted_waiting: false,
        }
    }
}

/// A service that waits for a token before it reports ready.
pub struct RateLimited<S> {
    inner: S,
    bucket: Option<Arc<SharedBucket>>,
    priority: Priority,
    waiting: Option<Pin<Box<Sleep>>>,
    /// A token was taken for the next call; it is not given back if the caller
    /// polls again before calling.
    holds_token: bool,
    /// A work request waits, and the bucket counts it (background requests hold back meanwhile).
    counted_waiting: bool,
}

impl<S> RateLimited<S> {
    fn set_counted_waiting(&mut self, waiting: bool) {
        if let Some(bucket) = &self.bucket
            && self.counted_waiting != waiting
        {
            if waiting {
                bucket.work_waiting.fetch_add(1, Ordering::SeqCst);
            } else {
                bucket.work_waiting.fetch_sub(1, Ordering::SeqCst);
            }
            self.counted_waiting = waiting;
        }
    }
}

impl<S> Drop for RateLimited<S> {
    fn drop(&mut self) {
        self.set_counted_waiting(false);
    }
}

impl<S, R> Service<R> for RateLimited<S>
where
    S: Service<R>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        if let Some(bucket) = self.bucket.clone() {
            while !self.holds_token {
                if let Some(waiting) = self.waiting.as_mut() {
                    ready!(waiting.as_mut().poll(cx));
                    self.waiting = None;
                }
                let work_waits = bucket.work_waiting.load(Ordering::SeqCst) > 0;
                let taken = match self.priority {
                    Priority::Background if work_waits => Err(bucket.period),
                    priority => bucket.take(priority),
                };
                match taken {
                    Ok(()) => {
                        self.holds_token = true;
                        self.set_counted_waiting(false);
                    }
                    Err(wait) => {
                        if self.priority == Priority::Work {
                            self.set_counted_waiting(true);
                        }
                        self.waiting = Some(Box::pin(tokio::time::sleep(wait)));
                    }
                }
            }
        }
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: R) -> Self::Future {
        self.holds_token = false;
        self.inner.call(request)
    }
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;

    use tower::ServiceExt;

    use super::*;

    #[test]
    fn bucket_allows_a_burst_then_qps() {
        let start = Instant::now();
        let mut bucket = TokenBucket::new(5.0, 10, start);
        for _ in 0..10 {
            assert_eq!(bucket.take(start), Ok(()));
        }
        assert_eq!(bucket.take(start), Err(Duration::from_millis(200)));
        assert_eq!(bucket.take(start + Duration::from_millis(200)), Ok(()));
        assert!(bucket.take(start + Duration::from_millis(300)).is_err());
        // A long pause refills at most `burst` tokens.
        let later = start + Duration::from_secs(3600);
        for _ in 0..10 {
            assert_eq!(bucket.take(later), Ok(()));
        }
        assert!(bucket.take(later).is_err());
    }

    #[test]
    fn a_reserve_is_left_in_the_bucket() {
        let start = Instant::now();
        // (burst, reserve asked, takes granted from a full bucket, wait for the next one in ms at 5/s)
        let cases = [(10, 5.0, 5, 200), (10, 0.0, 10, 200), (1, 0.0, 1, 200), (1, 1.0, 1, 200), (3, 1.0, 2, 200)];
        for (burst, reserve, granted, wait_ms) in cases {
            let mut bucket = TokenBucket::new(5.0, burst, start);
            for i in 0..granted {
                assert_eq!(bucket.take_keeping(reserve, start), Ok(()), "burst {burst} reserve {reserve}: take {i}");
            }
            let refused = bucket.take_keeping(reserve, start);
            assert_eq!(refused, Err(Duration::from_millis(wait_ms)), "burst {burst} reserve {reserve}");
            // What a background request left is still there for work.
            let left = (0..burst).take_while(|_| bucket.take(start).is_ok()).count();
            assert_eq!(left, burst as usize - granted, "burst {burst} reserve {reserve}");
        }
        assert_eq!(TokenBucket::new(5.0, 10, start).background_reserve(), 5.0);
        assert_eq!(TokenBucket::new(5.0, 1, start).background_reserve(), 0.0);
    }

    #[tokio::test(start_paused = true)]
    async fn background_requests_leave_half_the_burst_to_work() {
        let layer = RateLimitLayer::new(5.0, 10);
        let mut events = layer.background().layer(tower::service_fn(|r: u32| async move { Ok::<_, Infallible>(r) }));
        let mut work = layer.layer(tower::service_fn(|r: u32| async move { Ok::<_, Infallible>(r) }));
        let start = Instant::now();
        // Events with no work waiting: the first five go at once, the sixth waits for the bucket to hold six.
        for i in 0..5 {
            events.ready().await.unwrap();
            events.call(i).await.unwrap();
        }
        assert_eq!(start.elapsed(), Duration::ZERO);
        let sixth = tokio::time::timeout(Duration::from_millis(100), events.ready()).await;
        assert!(sixth.is_err(), "a sixth event would have taken a token of the reserved half");
        let start = Instant::now();
        // Work arriving now finds five tokens.
        for i in 0..5 {
            work.ready().await.unwrap();
            work.call(i).await.unwrap();
        }
        assert_eq!(start.elapsed(), Duration::ZERO, "work used the half of the burst the events left");
    }

    #[test]
    fn client_go_special_values() {
        assert!(RateLimitLayer::new(-1.0, 10).is_unlimited());
        assert!(!RateLimitLayer::new(0.0, 10).is_unlimited());
        let mut bucket = TokenBucket::new(1.0, 0, Instant::now());
        assert_eq!(bucket.take(Instant::now()), Ok(()), "burst 0 still lets one through");
    }

    #[tokio::test(start_paused = true)]
    async fn the_layer_spaces_requests_out() {
        let layer = RateLimitLayer::new(2.0, 3);
        let mut service = layer.layer(tower::service_fn(|request: u32| async move { Ok::<_, Infallible>(request) }));
        let start = Instant::now();
        let mut finished = Vec::new();
        for i in 0..7 {
            service.ready().await.unwrap();
            service.call(i).await.unwrap();
            finished.push(start.elapsed());
        }
        let ms = |list: &[u64]| list.iter().map(|m| Duration::from_millis(*m)).collect::<Vec<_>>();
        assert_eq!(finished, ms(&[0, 0, 0, 500, 1000, 1500, 2000]));
    }

    #[tokio::test(start_paused = true)]
    async fn background_requests_wait_while_work_waits() {
        let layer = RateLimitLayer::new(10.0, 1);
        let order = Arc::new(Mutex::new(Vec::new()));
        let run = |layer: &RateLimitLayer, name: &'static str, count: usize| {
            let mut service = layer.layer(tower::service_fn(|r: &'static str| async move { Ok::<_, Infallible>(r) }));
            let order = order.clone();
            tokio::spawn(async move {
                for _ in 0..count {
                    service.ready().await.unwrap();
                    let done: &'static str = service.call(name).await.unwrap();
                    order.lock().unwrap().push((done, Instant::now()));
                }
            })
        };
        let start = Instant::now();
        // Events queued first, work right after: once the first token is spent, every token goes to work.
        let events = run(&layer.background(), "event", 2);
        tokio::task::yield_now().await;
        let work = run(&layer, "work", 3);
        let (events, work) = tokio::join!(events, work);
        events.unwrap();
        work.unwrap();
        let order: Vec<_> = order.lock().unwrap().iter().map(|(name, at)| (*name, (*at - start).as_millis())).collect();
        let names: Vec<_> = order.iter().map(|(name, _)| *name).collect();
        assert_eq!(names, ["event", "work", "work", "work", "event"], "{order:?}");
        // Work still gets one token per 100 ms: the event waiting beside it costs it nothing.
        assert_eq!(order[3].1, 300, "{order:?}");
    }
}
