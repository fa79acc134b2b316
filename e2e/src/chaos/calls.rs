//! Which process made each changing call the hostpath plugin served, read back from its log, and the calls made by
//! a replica after another replica of the same sidecar had taken over.
//!
//! The plugin logs one line per changing call as it arrives, naming the caller's process id (the socket's peer
//! credentials): `… call method="CreateVolume" peer_pid=4242`. With leader election only the leader calls the
//! driver, and a replica that lost its Lease exits; so once another replica of the same sidecar has called, the
//! earlier one must never call again. A call that does is a duplicate: two replicas acted for the same sidecar,
//! the earlier one after it had stopped leading (e.g. paused past its Lease, then resumed).

use std::collections::{BTreeMap, BTreeSet};

/// One changing call the plugin served, in the order the calls came in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    pub method: String,
    pub pid: u32,
}

/// The calls a plugin log shows, in its order.
pub fn parse_calls(log: &str) -> Vec<Call> {
    log.lines().filter_map(parse_call).collect()
}

fn parse_call(line: &str) -> Option<Call> {
    let rest = &line[line.find(" call method=\"")? + " call method=\"".len()..];
    let (method, rest) = rest.split_once('"')?;
    let pid = rest.split_whitespace().find_map(|field| field.strip_prefix("peer_pid="))?.parse().ok()?;
    Some(Call { method: method.to_string(), pid })
}

/// The duplicate calls among `calls` (in arrival order): a call by a process of a sidecar after another process of
/// the same sidecar had called since this one's last call. `sidecar_of` names each sidecar process the run started;
/// calls of other processes are not judged, nor those of a process id the run saw twice (`reused`).
pub fn duplicate_calls(calls: &[Call], sidecar_of: &BTreeMap<u32, String>, reused: &BTreeSet<u32>) -> Vec<String> {
    // Per sidecar: the process that called last, and the processes that called before it.
    let mut current: BTreeMap<&str, u32> = BTreeMap::new();
    let mut retired: BTreeMap<&str, BTreeSet<u32>> = BTreeMap::new();
    let mut duplicates = Vec::new();
    for call in calls {
        let Some(sidecar) = sidecar_of.get(&call.pid).map(String::as_str) else { continue };
        if reused.contains(&call.pid) {
            continue;
        }
        let before = retired.entry(sidecar).or_default();
        if before.contains(&call.pid) {
            let leader = current.get(sidecar).copied().unwrap_or(0);
            duplicates.push(format!("{sidecar} pid {}: {} after pid {leader} took over", call.pid, call.method));
            continue;
        }
        if let Some(previous) = current.insert(sidecar, call.pid).filter(|p| *p != call.pid) {
            before.insert(previous);
        }
    }
    duplicates
}

#[cfg(test)]
mod tests {
    use super::*;

    fn calls(list: &[(&str, u32)]) -> Vec<Call> {
        list.iter().map(|(method, pid)| Call { method: method.to_string(), pid: *pid }).collect()
    }

    #[test]
    fn reads_the_plugins_call_lines() {
        let log = "2026-12-02T10:00:00.1Z  INFO hostpath_plugin::plugin: call method=\"CreateVolume\" peer_pid=41\n\
                   2026-12-02T10:00:00.2Z  INFO hostpath_plugin::plugin: ok method=\"CreateVolume\" elapsed_ms=3\n\
                   2026-12-02T10:00:00.3Z  WARN hostpath_plugin::plugin: injected fault instead of the work\n\
                   2026-12-02T10:00:00.4Z  INFO hostpath_plugin::plugin: call method=\"DeleteSnapshot\" peer_pid=7\n\
                   call method=\"CreateVolume\" peer_pid=x\n";
        assert_eq!(parse_calls(log), calls(&[("CreateVolume", 41), ("DeleteSnapshot", 7)]));
        assert_eq!(parse_calls(""), []);
    }

    #[test]
    fn counts_a_replica_calling_after_another_took_over() {
        let sidecars: BTreeMap<u32, String> = [
            (1, "csi-provisioner"),
            (2, "csi-provisioner"),
            (3, "csi-provisioner"),
            (10, "csi-snapshotter"),
            (11, "csi-snapshotter"),
        ]
        .into_iter()
        .map(|(pid, name)| (pid, name.to_string()))
        .collect();
        type Row = (&'static str, &'static [(&'static str, u32)], &'static [u32], usize);
        let rows: &[Row] = &[
            ("nothing", &[], &[], 0),
            ("one leader", &[("CreateVolume", 1), ("DeleteVolume", 1), ("CreateVolume", 1)], &[], 0),
            ("handovers, each leader stops", &[("CreateVolume", 1), ("CreateVolume", 2), ("CreateVolume", 3)], &[], 0),
            ("the old leader resumes", &[("CreateVolume", 1), ("CreateVolume", 2), ("CreateVolume", 1)], &[], 1),
            ("another method still counts", &[("CreateVolume", 1), ("CreateVolume", 2), ("DeleteVolume", 1)], &[], 1),
            (
                "each late call counts",
                &[("CreateVolume", 1), ("CreateVolume", 2), ("CreateVolume", 1), ("CreateVolume", 1)],
                &[],
                2,
            ),
            (
                "two leaders taking turns",
                &[("CreateVolume", 1), ("CreateVolume", 2), ("CreateVolume", 1), ("CreateVolume", 2)],
                &[],
                1,
            ),
            (
                "sidecars apart",
                &[("CreateVolume", 1), ("CreateSnapshot", 10), ("CreateVolume", 1), ("CreateSnapshot", 11)],
                &[],
                0,
            ),
            (
                "a process the run did not start",
                &[("CreateVolume", 1), ("CreateVolume", 99), ("CreateVolume", 1)],
                &[],
                0,
            ),
            ("a reused process id", &[("CreateVolume", 1), ("CreateVolume", 2), ("CreateVolume", 1)], &[1], 0),
        ];
        for (name, list, reused, want) in rows {
            let reused: BTreeSet<u32> = reused.iter().copied().collect();
            let found = duplicate_calls(&calls(list), &sidecars, &reused);
            assert_eq!(found.len(), *want, "{name}: {found:?}");
        }
        let found = duplicate_calls(
            &calls(&[("CreateVolume", 1), ("CreateVolume", 2), ("DeleteVolume", 1)]),
            &sidecars,
            &BTreeSet::new(),
        );
        assert_eq!(found, ["csi-provisioner pid 1: DeleteVolume after pid 2 took over"]);
    }
}
