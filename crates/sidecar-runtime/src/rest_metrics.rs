//! client-go's REST client metrics, which upstream's sidecars export and dashboards read:
//! `rest_client_requests_total{code, host, method}` and `rest_client_request_duration_seconds{host, verb}`
//! (client-go tools/metrics, registered by component-base's restclient package). A request is counted when its
//! answer arrives (`code` is the HTTP status, `<error>` when none came); its duration is from sending to the answer,
//! after the client-side rate limiter let it go, as client-go measures it.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use tower::{Layer, Service};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    code: String,
    host: String,
    method: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DurationLabels {
    host: String,
    verb: String,
}

/// client-go's request latency buckets, 5 ms to 60 s.
fn latency_histogram() -> Histogram {
    Histogram::new([0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0])
}

/// The two families; every client of a process records into the same ones. Cheap to clone.
#[derive(Clone, Debug)]
pub struct RestClientMetrics {
    requests: Family<RequestLabels, Counter>,
    durations: Family<DurationLabels, Histogram, fn() -> Histogram>,
}

impl Default for RestClientMetrics {
    fn default() -> Self {
        RestClientMetrics { requests: Family::default(), durations: Family::new_with_constructor(latency_histogram) }
    }
}

impl RestClientMetrics {
    /// The process's families, which every client [`crate::kube_client`] builds records into (client-go's are
    /// process-wide too).
    pub fn global() -> &'static RestClientMetrics {
        static GLOBAL: std::sync::OnceLock<RestClientMetrics> = std::sync::OnceLock::new();
        GLOBAL.get_or_init(RestClientMetrics::default)
    }

    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "rest_client_requests",
            "Number of HTTP requests, partitioned by status code, method, and host.",
            self.requests.clone(),
        );
        registry.register(
            "rest_client_request_duration_seconds",
            "Request latency in seconds. Broken down by verb, and host.",
            self.durations.clone(),
        );
    }

    /// A layer recording every request of a client whose server is `host` (`host:port`, as client-go's label).
    pub fn layer(&self, host: impl Into<String>) -> RestMetricsLayer {
        RestMetricsLayer { metrics: self.clone(), host: host.into() }
    }

    fn observe(&self, host: &str, method: &str, code: Option<u16>, seconds: f64) {
        let code = code.map_or_else(|| "<error>".to_string(), |c| c.to_string());
        let labels = RequestLabels { code, host: host.to_string(), method: method.to_string() };
        self.requests.get_or_create(&labels).inc();
        let labels = DurationLabels { host: host.to_string(), verb: method.to_string() };
        self.durations.get_or_create(&labels).observe(seconds);
    }
}

/// The `host` label of a client's server: `host:port` of its URL, the port filled in from the scheme.
pub fn host_label(url: &http::Uri) -> String {
    let host = url.host().unwrap_or_default();
    let port = url.port_u16().unwrap_or(if url.scheme_str() == Some("http") { 80 } else { 443 });
    format!("{host}:{port}")
}

#[derive(Clone, Debug)]
pub struct RestMetricsLayer {
    metrics: RestClientMetrics,
    host: String,
}

impl<S> Layer<S> for RestMetricsLayer {
    type Service = RestMetered<S>;

    fn layer(&self, inner: S) -> RestMetered<S> {
        RestMetered { inner, metrics: self.metrics.clone(), host: self.host.clone() }
    }
}

#[derive(Clone, Debug)]
pub struct RestMetered<S> {
    inner: S,
    metrics: RestClientMetrics,
    host: String,
}

impl<S, B, RB> Service<http::Request<B>> for RestMetered<S>
where
    S: Service<http::Request<B>, Response = http::Response<RB>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let method = request.method().as_str().to_string();
        let (metrics, host) = (self.metrics.clone(), self.host.clone());
        let started = Instant::now();
        let answer = self.inner.call(request);
        Box::pin(async move {
            let answer = answer.await;
            let code = answer.as_ref().ok().map(|response| response.status().as_u16());
            metrics.observe(&host, &method, code, started.elapsed().as_secs_f64());
            answer
        })
    }
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;

    use tower::ServiceExt;

    use super::*;

    fn scrape(metrics: &RestClientMetrics) -> String {
        let mut registry = Registry::default();
        metrics.register(&mut registry);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        text
    }

    #[tokio::test]
    async fn every_answer_is_counted_with_its_code_method_and_host() {
        let metrics = RestClientMetrics::default();
        let answer = |status: u16| {
            tower::service_fn(move |_: http::Request<()>| async move {
                Ok::<_, Infallible>(http::Response::builder().status(status).body(()).unwrap())
            })
        };
        let layer = metrics.layer("10.0.0.1:443");
        for (method, status) in [("GET", 200), ("GET", 200), ("PATCH", 409)] {
            let request = http::Request::builder().method(method).uri("/api/v1/pods").body(()).unwrap();
            layer.layer(answer(status)).oneshot(request).await.unwrap();
        }
        let failing = tower::service_fn(|_: http::Request<()>| async { Err::<http::Response<()>, _>("refused") });
        let request = http::Request::builder().method("PUT").uri("/x").body(()).unwrap();
        assert!(layer.layer(failing).oneshot(request).await.is_err());

        let text = scrape(&metrics);
        for line in [
            r#"rest_client_requests_total{code="200",host="10.0.0.1:443",method="GET"} 2"#,
            r#"rest_client_requests_total{code="409",host="10.0.0.1:443",method="PATCH"} 1"#,
            r#"rest_client_requests_total{code="<error>",host="10.0.0.1:443",method="PUT"} 1"#,
            r#"rest_client_request_duration_seconds_count{host="10.0.0.1:443",verb="GET"} 2"#,
            r#"rest_client_request_duration_seconds_bucket{le="60.0",host="10.0.0.1:443",verb="PATCH"} 1"#,
        ] {
            assert!(text.lines().any(|l| l == line), "{line} missing from:\n{text}");
        }
    }

    #[test]
    fn the_host_label_is_host_and_port() {
        let table = [
            ("https://10.0.0.1", "10.0.0.1:443"),
            ("https://127.0.0.1:26443", "127.0.0.1:26443"),
            ("http://api.example", "api.example:80"),
            ("https://kubernetes.default.svc/", "kubernetes.default.svc:443"),
        ];
        for (url, want) in table {
            assert_eq!(host_label(&url.parse().unwrap()), want, "{url}");
        }
    }
}
