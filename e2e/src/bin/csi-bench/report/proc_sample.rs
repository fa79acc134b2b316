//! A sidecar's CPU time and peak memory, read from /proc: the same numbers for a Rust and a Go process.

use std::path::Path;

/// What /proc says about one process at one moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ProcSample {
    /// utime + stime, in clock ticks.
    pub cpu_ticks: u64,
    /// VmHWM: the peak resident set size so far, in KiB.
    pub peak_rss_kib: u64,
}

impl ProcSample {
    /// Reads /proc/<pid>/stat and /proc/<pid>/status; None once the process is gone.
    pub fn of(pid: u32) -> Option<ProcSample> {
        let proc = Path::new("/proc").join(pid.to_string());
        let stat = std::fs::read_to_string(proc.join("stat")).ok()?;
        let status = std::fs::read_to_string(proc.join("status")).ok()?;
        Some(ProcSample { cpu_ticks: cpu_ticks(&stat)?, peak_rss_kib: peak_rss_kib(&status)? })
    }

    /// CPU milliseconds spent between `earlier` and `self`, at `ticks_per_second`.
    pub fn cpu_ms_since(&self, earlier: &ProcSample, ticks_per_second: u64) -> f64 {
        self.cpu_ticks.saturating_sub(earlier.cpu_ticks) as f64 * 1000.0 / ticks_per_second as f64
    }
}

/// utime + stime (fields 14 and 15) of a /proc/<pid>/stat line. The command name (field 2) sits in parentheses and
/// may hold spaces or parentheses itself, so the fields are counted after its last ')'.
pub fn cpu_ticks(stat: &str) -> Option<u64> {
    let after_name = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    // After the name, field 3 (state) is index 0: utime (14) is index 11, stime (15) index 12.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(utime + stime)
}

/// VmHWM of a /proc/<pid>/status text, in KiB.
pub fn peak_rss_kib(status: &str) -> Option<u64> {
    let line = status.lines().find(|line| line.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// The kernel's clock ticks per second (`getconf CLK_TCK`); 100, Linux's value, when getconf cannot say.
pub fn ticks_per_second() -> u64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|out| String::from_utf8(out.stdout).ok())
        .and_then(|text| text.trim().parse().ok())
        .unwrap_or(100)
}

#[cfg(test)]
mod tests {
    use super::*;

    const STAT: &str = "4242 (csi-provisioner) S 1 4242 4242 0 -1 4194560 1200 0 0 0 250 75 0 0 20 0 12 0 \
                        987 123456789 7000 18446744073709551615";

    #[test]
    fn cpu_ticks_are_utime_plus_stime() {
        let rows: &[(&str, Option<u64>)] = &[
            (STAT, Some(325)),
            // A name with a space and a parenthesis does not shift the fields.
            ("7 (a) b) S 1 7 7 0 -1 0 0 0 0 0 10 5 0 0", Some(15)),
            // Too few fields, or not a number: no reading.
            ("7 (x) S 1 7", None),
            ("7 (x) S 1 7 7 0 -1 0 0 0 0 0 ten 5", None),
            ("no parenthesis at all", None),
        ];
        for (stat, want) in rows {
            assert_eq!(cpu_ticks(stat), *want, "{stat}");
        }
    }

    #[test]
    fn peak_rss_is_vmhwm() {
        let rows: &[(&str, Option<u64>)] = &[
            ("Name:\tx\nVmPeak:\t  900 kB\nVmHWM:\t   30720 kB\nVmRSS:\t 2000 kB\n", Some(30720)),
            // A kernel thread has no memory lines.
            ("Name:\tkthreadd\nState:\tS\n", None),
        ];
        for (status, want) in rows {
            assert_eq!(peak_rss_kib(status), *want, "{status}");
        }
    }

    #[test]
    fn cpu_ms_between_two_samples() {
        let before = ProcSample { cpu_ticks: 100, peak_rss_kib: 1 };
        let after = ProcSample { cpu_ticks: 350, peak_rss_kib: 2 };
        assert_eq!(after.cpu_ms_since(&before, 100), 2500.0);
        // A later sample never reads as negative time.
        assert_eq!(before.cpu_ms_since(&after, 100), 0.0);
    }

    #[test]
    fn this_process_can_be_read() {
        let sample = ProcSample::of(std::process::id()).expect("own /proc entry");
        assert!(sample.peak_rss_kib > 0);
    }
}
