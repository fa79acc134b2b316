//! The `process_*` metrics Prometheus' Go client exports from every upstream sidecar (its process collector), read
//! from `/proc/self` on each scrape, so that dashboards built on upstream's series keep working: CPU seconds,
//! resident and virtual memory, open and maximum file descriptors, start time, and network bytes.

use std::fmt;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Registry;

/// Registers the process collector.
pub fn register(registry: &mut Registry) {
    registry.register_collector(Box::new(ProcessCollector));
}

#[derive(Debug)]
struct ProcessCollector;

/// What `/proc/self/stat` says, in the units the metrics use.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Stat {
    /// User plus system CPU time, in seconds.
    pub cpu_seconds: f64,
    /// Seconds after boot at which the process started.
    pub started_after_boot: f64,
    pub virtual_bytes: u64,
    pub resident_bytes: u64,
}

/// Parses `/proc/<pid>/stat`. The command name (field 2) is in parentheses and may itself hold spaces and
/// parentheses, so the fields after it are counted from its last `)`.
pub fn parse_stat(text: &str, ticks_per_second: f64, page_size: u64) -> Option<Stat> {
    let after_name = &text[text.rfind(')')? + 1..];
    // Fields 3 onwards: state is the first here, so field N is at index N - 3.
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    let field = |n: usize| fields.get(n - 3).and_then(|f| f.parse::<u64>().ok());
    Some(Stat {
        cpu_seconds: (field(14)? + field(15)?) as f64 / ticks_per_second,
        started_after_boot: field(22)? as f64 / ticks_per_second,
        virtual_bytes: field(23)?,
        resident_bytes: field(24)? * page_size,
    })
}

/// The boot time (`btime`) from `/proc/stat`, in seconds since the epoch.
pub fn parse_boot_time(text: &str) -> Option<u64> {
    text.lines().find_map(|line| line.strip_prefix("btime ")).and_then(|v| v.trim().parse().ok())
}

/// A soft limit of `/proc/<pid>/limits` ("Max open files", "Max address space"); `unlimited` is `None`.
pub fn parse_soft_limit(text: &str, name: &str) -> Option<Option<u64>> {
    let line = text.lines().find(|line| line.starts_with(name))?;
    let soft = line[name.len()..].split_whitespace().next()?;
    Some(if soft == "unlimited" { None } else { Some(soft.parse().ok()?) })
}

/// Received and transmitted bytes summed over every interface of `/proc/<pid>/net/dev` (the network namespace of
/// the process, which in a pod is the pod's).
pub fn parse_net_dev(text: &str) -> (u64, u64) {
    text.lines()
        .filter_map(|line| line.split_once(':'))
        .filter_map(|(_, counters)| {
            let fields: Vec<u64> = counters.split_whitespace().filter_map(|f| f.parse().ok()).collect();
            Some((*fields.first()?, *fields.get(8)?))
        })
        .fold((0, 0), |(rx, tx), (r, t)| (rx + r, tx + t))
}

fn read(path: &str) -> Option<String> {
    std::fs::read_to_string(path).ok()
}

fn describe_gauge(encoder: &mut DescriptorEncoder, name: &str, help: &str, value: f64) -> fmt::Result {
    let metric = ConstGauge::new(value);
    metric.encode(encoder.encode_descriptor(name, help, None, metric.metric_type())?)
}

fn describe_counter(encoder: &mut DescriptorEncoder, name: &str, help: &str, value: f64) -> fmt::Result {
    let metric = ConstCounter::new(value);
    metric.encode(encoder.encode_descriptor(name, help, None, metric.metric_type())?)
}

impl Collector for ProcessCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> fmt::Result {
        let e = &mut encoder;
        // SAFETY: sysconf only reads a system constant.
        let (ticks, page) = unsafe { (libc::sysconf(libc::_SC_CLK_TCK), libc::sysconf(libc::_SC_PAGESIZE)) };
        let (ticks, page) = (if ticks > 0 { ticks as f64 } else { 100.0 }, if page > 0 { page as u64 } else { 4096 });
        if let Some(stat) = read("/proc/self/stat").and_then(|t| parse_stat(&t, ticks, page)) {
            describe_counter(
                e,
                "process_cpu_seconds",
                "Total user and system CPU time spent in seconds.",
                stat.cpu_seconds,
            )?;
            describe_gauge(
                e,
                "process_virtual_memory_bytes",
                "Virtual memory size in bytes.",
                stat.virtual_bytes as f64,
            )?;
            describe_gauge(
                e,
                "process_resident_memory_bytes",
                "Resident memory size in bytes.",
                stat.resident_bytes as f64,
            )?;
            if let Some(boot) = read("/proc/stat").and_then(|t| parse_boot_time(&t)) {
                let started = boot as f64 + stat.started_after_boot;
                describe_gauge(
                    e,
                    "process_start_time_seconds",
                    "Start time of the process since unix epoch in seconds.",
                    started,
                )?;
            }
        }
        if let Ok(fds) = std::fs::read_dir("/proc/self/fd") {
            describe_gauge(e, "process_open_fds", "Number of open file descriptors.", fds.count() as f64)?;
        }
        if let Some(limits) = read("/proc/self/limits") {
            if let Some(Some(max)) = parse_soft_limit(&limits, "Max open files") {
                describe_gauge(e, "process_max_fds", "Maximum number of open file descriptors.", max as f64)?;
            }
            if let Some(max) = parse_soft_limit(&limits, "Max address space") {
                // Go's client reports an unlimited address space as the largest unsigned value.
                let max = max.map_or(u64::MAX as f64, |m| m as f64);
                let help = "Maximum amount of virtual memory available in bytes.";
                describe_gauge(e, "process_virtual_memory_max_bytes", help, max)?;
            }
        }
        if let Some(net) = read("/proc/self/net/dev") {
            let (rx, tx) = parse_net_dev(&net);
            describe_counter(
                e,
                "process_network_receive_bytes",
                "Number of bytes received by the process over the network.",
                rx as f64,
            )?;
            describe_counter(
                e,
                "process_network_transmit_bytes",
                "Number of bytes sent by the process over the network.",
                tx as f64,
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_are_counted_after_the_last_parenthesis() {
        // (name, text, want): utime 14 = 250, stime 15 = 50, starttime 22 = 1000, vsize 23, rss 24 = 10 pages.
        let rest = "S 1 1 1 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 4 0 1000 123456789 10 18446744073709551615";
        let table = [
            ("plain name", format!("42 (csi-resizer) {rest}")),
            ("name with spaces and parentheses", format!("42 (a) b (c)) {rest}")),
        ];
        for (name, text) in table {
            let stat = parse_stat(&text, 100.0, 4096).unwrap_or_else(|| panic!("{name}: not parsed"));
            assert_eq!(
                stat,
                Stat { cpu_seconds: 3.0, started_after_boot: 10.0, virtual_bytes: 123456789, resident_bytes: 40960 },
                "{name}"
            );
        }
        assert_eq!(parse_stat("42 (truncated) S 1", 100.0, 4096), None, "a short line is not a stat");
    }

    #[test]
    fn boot_time_limits_and_network_counters() {
        assert_eq!(parse_boot_time("cpu  1 2 3\nbtime 1764230000\nprocesses 9\n"), Some(1764230000));
        assert_eq!(parse_boot_time("cpu 1\n"), None);

        let limits = "Limit                     Soft Limit           Hard Limit           Units     \n\
                      Max address space         unlimited            unlimited            bytes     \n\
                      Max open files            1048576              1048576              files     \n";
        assert_eq!(parse_soft_limit(limits, "Max open files"), Some(Some(1048576)));
        assert_eq!(parse_soft_limit(limits, "Max address space"), Some(None), "unlimited");
        assert_eq!(parse_soft_limit(limits, "Max processes"), None, "absent");

        let net = "Inter-|   Receive                            |  Transmit\n \
                   face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets\n    \
                   lo: 1000 10 0 0 0 0 0 0 2000 20 0 0 0 0 0 0\n  \
                   eth0: 300 3 0 0 0 0 0 0 400 4 0 0 0 0 0 0\n";
        assert_eq!(parse_net_dev(net), (1300, 2400));
    }

    #[test]
    fn every_upstream_process_series_is_exported() {
        let mut registry = Registry::default();
        register(&mut registry);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        for series in [
            "process_cpu_seconds_total ",
            "process_resident_memory_bytes ",
            "process_virtual_memory_bytes ",
            "process_virtual_memory_max_bytes ",
            "process_start_time_seconds ",
            "process_open_fds ",
            "process_max_fds ",
            "process_network_receive_bytes_total ",
            "process_network_transmit_bytes_total ",
        ] {
            assert!(text.lines().any(|l| l.starts_with(series)), "{series} missing from:\n{text}");
        }
    }
}
