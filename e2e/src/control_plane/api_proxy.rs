//! A fault-injecting proxy between sidecars and kube-apiserver: the sidecars' kubeconfig names it (plain HTTP on
//! 127.0.0.1), it forwards each request with the sidecar's own bearer token to kube-apiserver (TLS, the cluster's
//! CA), and answers a share of them itself:
//!
//! - a request that is not a watch: 429 with `Retry-After: 1` (as API Priority and Fairness answers), 500, 503, the
//!   connection closed without an answer, or forwarded and then answered 500 (the write is done, the caller sees an
//!   error, as after a lost response);
//! - a watch is cut after a few seconds (the caller watches again from its last resourceVersion), and a share of
//!   the watches that resume from a resourceVersion are answered with 410 Expired, as after etcd compacted it away:
//!   the caller must list again (a forced relist).
//!
//! Tests steer watches by hand as well ([`ApiProxy::hold_watches`], [`ApiProxy::expire_resumed_watches`]): every
//! open watch cut at once and new ones refused while held, then resumed watches answered 410 once: a relist at a
//! moment of the test's choosing, with what changed meanwhile seen only by that list.
//!
//! [`decide`] is the rule, without I/O; [`ApiProxy`] serves it.

use std::collections::BTreeMap;
use std::hash::{BuildHasher, RandomState};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;
use futures::StreamExt;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, BodyStream, Full, StreamBody};
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;

type BoxError = Box<dyn std::error::Error + Send + Sync>;
type ProxyBody = UnsyncBoxBody<Bytes, BoxError>;

/// Shares of requests that get each fault; one draw per request, so at most one fires.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiFaults {
    /// Of the requests that are not watches: answered 429 Too Many Requests with `Retry-After: 1`.
    pub too_many_requests: f64,
    pub internal_error: f64,
    pub unavailable: f64,
    /// The connection closed without an answer.
    pub reset: f64,
    /// Forwarded, then answered 500 whatever kube-apiserver said.
    pub error_after_forward: f64,
    /// Of the watches that resume from a resourceVersion: answered 410 Expired.
    pub expired_watch: f64,
    /// A watch is cut between this long and twice as long after it started.
    pub watch_cut_after: Duration,
}

impl ApiFaults {
    /// `share` of the requests that are not watches get a fault (40 % of those 429, 20 % 500, 20 % 503, 10 % reset,
    /// 10 % 500 after the work), a third of resumed watches 410, every watch cut after 10 to 20 s; none at all
    /// for a share of 0.
    pub fn standard(share: f64) -> ApiFaults {
        ApiFaults {
            too_many_requests: share * 0.4,
            internal_error: share * 0.2,
            unavailable: share * 0.2,
            reset: share * 0.1,
            error_after_forward: share * 0.1,
            expired_watch: if share > 0.0 { 1.0 / 3.0 } else { 0.0 },
            watch_cut_after: if share > 0.0 { Duration::from_secs(10) } else { Duration::ZERO },
        }
    }
}

/// What the proxy does with one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Verdict {
    Forward,
    /// Answered with this status (429, 500, 503) without forwarding.
    Answer(u16),
    /// The connection is closed without an answer.
    Reset,
    /// Forwarded, then answered 500.
    ErrorAfterForward,
    /// A watch answered with a 410 Expired event.
    ExpireWatch,
    /// A watch forwarded and cut after this many milliseconds.
    CutWatch(u64),
    /// A watch cut or refused (503) while the test holds watches ([`ApiProxy::hold_watches`]).
    HeldWatch,
}

impl Verdict {
    /// The name in the proxy's counts.
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Forward => "forwarded",
            Verdict::Answer(429) => "429",
            Verdict::Answer(500) => "500",
            Verdict::Answer(503) => "503",
            Verdict::Answer(_) => "other status",
            Verdict::Reset => "reset",
            Verdict::ErrorAfterForward => "500 after the work",
            Verdict::ExpireWatch => "410 watch",
            Verdict::CutWatch(_) => "cut watch",
            Verdict::HeldWatch => "held watch",
        }
    }

    /// Whether the caller did not get kube-apiserver's own answer.
    pub fn is_fault(self) -> bool {
        !matches!(self, Verdict::Forward)
    }
}

/// The request as [`decide`] sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestKind {
    pub watch: bool,
    /// A watch that resumes from a resourceVersion other than "" and "0".
    pub resumes: bool,
}

impl RequestKind {
    /// From the request's query string.
    pub fn of_query(query: Option<&str>) -> RequestKind {
        let params: BTreeMap<&str, &str> =
            query.unwrap_or_default().split('&').filter_map(|pair| pair.split_once('=')).collect();
        let watch = params.get("watch").is_some_and(|v| *v == "true" || *v == "1");
        let resumes = watch && params.get("resourceVersion").is_some_and(|rv| !rv.is_empty() && *rv != "0");
        RequestKind { watch, resumes }
    }
}

/// The verdict for a request of `kind`, given two draws in [0, 1): `draw` picks the fault, `spread` the moment a
/// watch is cut.
pub fn decide(kind: RequestKind, draw: f64, spread: f64, faults: &ApiFaults) -> Verdict {
    if kind.watch {
        if kind.resumes && draw < faults.expired_watch {
            return Verdict::ExpireWatch;
        }
        if faults.watch_cut_after.is_zero() {
            return Verdict::Forward;
        }
        let cut = faults.watch_cut_after.mul_f64(1.0 + spread.clamp(0.0, 1.0));
        return Verdict::CutWatch(cut.as_millis() as u64);
    }
    let alternatives = [
        (faults.too_many_requests, Verdict::Answer(429)),
        (faults.internal_error, Verdict::Answer(500)),
        (faults.unavailable, Verdict::Answer(503)),
        (faults.reset, Verdict::Reset),
        (faults.error_after_forward, Verdict::ErrorAfterForward),
    ];
    let mut total = 0.0;
    for (share, verdict) in alternatives {
        total += share;
        if draw < total {
            return verdict;
        }
    }
    Verdict::Forward
}

/// A Status body as kube-apiserver writes one.
fn status_json(code: u16, reason: &str, message: &str) -> serde_json::Value {
    serde_json::json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": message, "reason": reason, "code": code,
    })
}

/// The running proxy; stops when dropped.
pub struct ApiProxy {
    addr: SocketAddr,
    state: Arc<State>,
    task: tokio::task::JoinHandle<()>,
}

/// Watches as the test steers them: forwarded ([`Self::PASS`]), refused ([`Self::HOLD`]), or resumed ones expired.
struct WatchPhase;

impl WatchPhase {
    const PASS: u8 = 0;
    const HOLD: u8 = 1;
    const EXPIRE: u8 = 2;
}

struct State {
    upstream: kube::Client,
    faults: ApiFaults,
    on: AtomicBool,
    /// A [`WatchPhase`].
    watch_phase: AtomicU8,
    /// Bumped to cut every open watch.
    cuts: tokio::sync::watch::Sender<u64>,
    counts: Mutex<BTreeMap<&'static str, u64>>,
    draws: AtomicU64,
    random: RandomState,
}

impl State {
    /// A number in [0, 1), different on every call.
    fn draw(&self) -> f64 {
        let n = self.draws.fetch_add(1, Ordering::Relaxed);
        (self.random.hash_one(n) >> 11) as f64 / (1u64 << 53) as f64
    }

    fn count(&self, verdict: Verdict) {
        *self.counts.lock().unwrap_or_else(|p| p.into_inner()).entry(verdict.name()).or_default() += 1;
    }
}

impl ApiProxy {
    /// Listens on 127.0.0.1 (a free port) and forwards to the cluster of `kubeconfig` (its server and CA; not its
    /// user: each request carries its caller's own token).
    pub async fn start(kubeconfig: &std::path::Path, faults: ApiFaults) -> anyhow::Result<ApiProxy> {
        let mut file = kube::config::Kubeconfig::read_from(kubeconfig).context("reading the admin kubeconfig")?;
        for user in &mut file.auth_infos {
            user.auth_info = Some(kube::config::AuthInfo::default());
        }
        let config = kube::Config::from_custom_kubeconfig(file, &kube::config::KubeConfigOptions::default())
            .await
            .context("the admin kubeconfig's cluster")?;
        let upstream = kube::Client::try_from(config).context("a client for kube-apiserver")?;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let state = Arc::new(State {
            upstream,
            faults,
            on: AtomicBool::new(true),
            watch_phase: AtomicU8::new(WatchPhase::PASS),
            cuts: tokio::sync::watch::Sender::new(0),
            counts: Mutex::new(BTreeMap::new()),
            draws: AtomicU64::new(0),
            random: RandomState::new(),
        });
        let serving = state.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else { continue };
                let state = serving.clone();
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |request| serve(state.clone(), request));
                    // A connection the proxy resets ends with an error here; nothing to report.
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Ok(ApiProxy { addr, state, task })
    }

    /// `http://127.0.0.1:<port>`, the server for the sidecars' kubeconfig.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Faults on or off; off, every request is forwarded.
    pub fn set_faults(&self, on: bool) {
        self.state.on.store(on, Ordering::Relaxed);
    }

    /// Cuts every open watch now and answers 503 to every watch until [`ApiProxy::expire_resumed_watches`]: the
    /// sidecars' caches stop seeing changes, and their watches retry from the resourceVersion they had.
    pub fn hold_watches(&self) {
        self.state.watch_phase.store(WatchPhase::HOLD, Ordering::SeqCst);
        self.state.cuts.send_modify(|generation| *generation += 1);
    }

    /// Ends [`ApiProxy::hold_watches`]: a watch resuming from a resourceVersion is answered 410 Expired, as after
    /// etcd compacted that version away, so every cache lists again; the watches after that list go through.
    pub fn expire_resumed_watches(&self) {
        self.state.watch_phase.store(WatchPhase::EXPIRE, Ordering::SeqCst);
    }

    /// How many requests got each verdict so far.
    pub fn counts(&self) -> BTreeMap<&'static str, u64> {
        self.state.counts.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// How many answers were not kube-apiserver's own.
    pub fn faults_injected(&self) -> u64 {
        self.counts().iter().filter(|(name, _)| **name != Verdict::Forward.name()).map(|(_, n)| n).sum()
    }
}

impl Drop for ApiProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// `kubeconfig` rewritten to reach the cluster through `proxy_url` (plain HTTP, so without a CA).
pub fn through_proxy(kubeconfig: &std::path::Path, proxy_url: &str) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(kubeconfig)?;
    let mut config: serde_json::Value = serde_json::from_str(&text).context("a JSON kubeconfig")?;
    for cluster in config["clusters"].as_array_mut().into_iter().flatten() {
        let cluster = &mut cluster["cluster"];
        cluster["server"] = proxy_url.into();
        if let Some(fields) = cluster.as_object_mut() {
            fields.remove("certificate-authority-data");
            fields.remove("certificate-authority");
        }
    }
    std::fs::write(kubeconfig, serde_json::to_vec_pretty(&config)?)?;
    Ok(())
}

async fn serve(state: Arc<State>, request: Request<Incoming>) -> Result<Response<ProxyBody>, BoxError> {
    let kind = RequestKind::of_query(request.uri().query());
    if kind.watch {
        match state.watch_phase.load(Ordering::SeqCst) {
            WatchPhase::HOLD => {
                state.count(Verdict::HeldWatch);
                return Ok(answer(503));
            }
            WatchPhase::EXPIRE if kind.resumes => {
                state.count(Verdict::ExpireWatch);
                return expired();
            }
            _ => {}
        }
    }
    let verdict = if state.on.load(Ordering::Relaxed) {
        decide(kind, state.draw(), state.draw(), &state.faults)
    } else {
        Verdict::Forward
    };
    // A cut watch that was forwarded counts as a fault only if it was cut; it is counted when cut.
    if !matches!(verdict, Verdict::CutWatch(_)) {
        state.count(verdict);
    }
    match verdict {
        Verdict::Answer(code) => Ok(answer(code)),
        Verdict::Reset => Err("chaos: connection reset".into()),
        Verdict::ExpireWatch => expired(),
        Verdict::HeldWatch => Ok(answer(503)),
        Verdict::Forward | Verdict::ErrorAfterForward | Verdict::CutWatch(_) => {
            let response = forward(&state, request).await?;
            match verdict {
                Verdict::ErrorAfterForward => Ok(answer(500)),
                Verdict::CutWatch(ms) => Ok(cut_after(state.clone(), response, Some(Duration::from_millis(ms)))),
                _ if kind.watch => Ok(cut_after(state.clone(), response, None)),
                _ => Ok(response.map(|body| body.map_err(BoxError::from).boxed_unsync())),
            }
        }
    }
}

/// A watch's answer: one ERROR event of 410 Expired.
fn expired() -> Result<Response<ProxyBody>, BoxError> {
    let event = serde_json::json!({
        "type": "ERROR",
        "object": status_json(410, "Expired", "chaos: too old resource version"),
    });
    let mut line = serde_json::to_vec(&event)?;
    line.push(b'\n');
    let mut response = Response::new(full(line));
    response.headers_mut().insert(hyper::header::CONTENT_TYPE, "application/json".parse()?);
    Ok(response)
}

/// The request sent on to kube-apiserver, and its answer.
async fn forward(state: &State, request: Request<Incoming>) -> Result<Response<kube::client::Body>, BoxError> {
    let (mut parts, body) = request.into_parts();
    let body = body.collect().await?.to_bytes();
    for hop in [hyper::header::HOST, hyper::header::CONNECTION, hyper::header::TRANSFER_ENCODING] {
        parts.headers.remove(hop);
    }
    let upstream = Request::from_parts(parts, kube::client::Body::from(body));
    let mut response = state.upstream.send(upstream).await?;
    for hop in [hyper::header::CONNECTION, hyper::header::TRANSFER_ENCODING, hyper::header::CONTENT_LENGTH] {
        response.headers_mut().remove(hop);
    }
    Ok(response)
}

fn answer(code: u16) -> Response<ProxyBody> {
    let (reason, message) = match code {
        429 => ("TooManyRequests", "chaos: too many requests, please try again later"),
        503 => ("ServiceUnavailable", "chaos: the server is currently unable to handle the request"),
        _ => ("InternalError", "chaos: an error on the server has prevented the request from succeeding"),
    };
    let body = serde_json::to_vec(&status_json(code, reason, message)).unwrap_or_default();
    let mut response = Response::new(full(body));
    *response.status_mut() = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let headers = response.headers_mut();
    headers.insert(hyper::header::CONTENT_TYPE, hyper::header::HeaderValue::from_static("application/json"));
    if code == 429 {
        headers.insert(hyper::header::RETRY_AFTER, hyper::header::HeaderValue::from_static("1"));
    }
    response
}

fn full(bytes: impl Into<Bytes>) -> ProxyBody {
    Full::new(bytes.into()).map_err(|never| match never {}).boxed_unsync()
}

/// A watch's answer that ends with an error `after` its start (when given) or at the next
/// [`ApiProxy::hold_watches`], unless it ended before.
fn cut_after(
    state: Arc<State>,
    response: Response<kube::client::Body>,
    after: Option<Duration>,
) -> Response<ProxyBody> {
    let mut cuts = state.cuts.subscribe();
    cuts.mark_unchanged();
    response.map(|body| {
        let deadline = Box::pin(tokio::time::sleep(after.unwrap_or(Duration::from_secs(86_400 * 365))));
        let frames = futures::stream::unfold(Some((BodyStream::new(body), deadline, cuts)), move |open| {
            let state = state.clone();
            async move {
                let (mut body, mut deadline, mut cuts) = open?;
                tokio::select! {
                    frame = body.next() => {
                        let frame = frame?.map_err(BoxError::from);
                        Some((frame, Some((body, deadline, cuts))))
                    }
                    () = &mut deadline => {
                        state.count(Verdict::CutWatch(after.unwrap_or_default().as_millis() as u64));
                        Some((Err(BoxError::from("chaos: watch connection cut")), None))
                    }
                    Ok(()) = cuts.changed() => {
                        state.count(Verdict::HeldWatch);
                        Some((Err(BoxError::from("test: every watch cut")), None))
                    }
                }
            }
        });
        StreamBody::new(frames).boxed_unsync()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_request_kind_from_the_query() {
        let cases: &[(Option<&str>, bool, bool)] = &[
            (None, false, false),
            (Some("limit=500"), false, false),
            (Some("watch=true&resourceVersion=123&timeoutSeconds=290"), true, true),
            (Some("watch=1&resourceVersion=0"), true, false),
            (Some("watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan"), true, false),
            (Some("watch=false&resourceVersion=9"), false, false),
        ];
        for (query, watch, resumes) in cases {
            assert_eq!(RequestKind::of_query(*query), RequestKind { watch: *watch, resumes: *resumes }, "{query:?}");
        }
    }

    #[test]
    fn one_draw_picks_at_most_one_fault() {
        let faults = ApiFaults::standard(0.1);
        let plain = RequestKind { watch: false, resumes: false };
        let resumed = RequestKind { watch: true, resumes: true };
        let fresh = RequestKind { watch: true, resumes: false };
        let cases: &[(RequestKind, f64, f64, Verdict)] = &[
            (plain, 0.0, 0.0, Verdict::Answer(429)),
            (plain, 0.039, 0.0, Verdict::Answer(429)),
            (plain, 0.041, 0.0, Verdict::Answer(500)),
            (plain, 0.061, 0.0, Verdict::Answer(503)),
            (plain, 0.081, 0.0, Verdict::Reset),
            (plain, 0.091, 0.0, Verdict::ErrorAfterForward),
            (plain, 0.101, 0.0, Verdict::Forward),
            (plain, 0.99, 0.5, Verdict::Forward),
            (resumed, 0.2, 0.0, Verdict::ExpireWatch),
            (resumed, 0.5, 0.0, Verdict::CutWatch(10_000)),
            (fresh, 0.0, 0.5, Verdict::CutWatch(15_000)),
            (fresh, 0.0, 1.0, Verdict::CutWatch(20_000)),
        ];
        for (kind, draw, spread, want) in cases {
            assert_eq!(decide(*kind, *draw, *spread, &faults), *want, "{kind:?} {draw} {spread}");
        }
    }

    #[test]
    fn no_share_forwards_everything() {
        let faults = ApiFaults::standard(0.0);
        for watch in [false, true] {
            for resumes in [false, true] {
                let kind = RequestKind { watch, resumes: watch && resumes };
                assert_eq!(decide(kind, 0.0, 0.0, &faults), Verdict::Forward, "{kind:?}");
            }
        }
    }

    #[test]
    fn counts_only_what_was_not_the_servers_answer() {
        let faults = [Verdict::Answer(429), Verdict::Reset, Verdict::ExpireWatch, Verdict::CutWatch(1)];
        assert!(faults.iter().all(|v| v.is_fault()));
        assert!(!Verdict::Forward.is_fault());
        let names: Vec<&str> = faults.iter().map(|v| v.name()).collect();
        assert_eq!(names, ["429", "reset", "410 watch", "cut watch"]);
    }
}
