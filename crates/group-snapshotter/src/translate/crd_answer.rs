//! Whether the API server serves the group snapshot kinds, from the answer to a one-item list of each. Only a
//! definite answer turns groups off for the run: the kinds are not there (404), or this identity may not read them
//! (403). Anything else (a 5xx, 429, a dropped connection, a timeout) says nothing about the CRDs and is asked again,
//! so that one failed request at start does not leave the process without group snapshots until its next restart.

use std::time::Duration;

use sidecar_runtime::api_error::{is_forbidden, is_not_found};

/// What one check's answer means.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Served {
    Yes,
    /// Definitely not: the reason, for the warning.
    No(String),
    /// The check failed on the way: ask again.
    Unknown(String),
}

/// The meaning of one check's outcome.
pub fn served(outcome: Result<(), &kube::Error>) -> Served {
    match outcome {
        Ok(()) => Served::Yes,
        Err(error @ kube::Error::Api(status)) if is_not_found(error) || is_forbidden(error) => {
            Served::No(status.to_string())
        }
        Err(error) => Served::Unknown(error.to_string()),
    }
}

/// The waits between checks whose answer was [`Served::Unknown`]: 1 s doubling to 30 s, about two minutes in all;
/// after the last one the run goes on without groups.
pub fn retry_waits() -> Vec<Duration> {
    [1, 2, 4, 8, 16, 30, 30, 30].map(Duration::from_secs).to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api(code: u16) -> kube::Error {
        kube::Error::Api(kube::core::Status::failure(&format!("code {code}"), "Reason").with_code(code).boxed())
    }

    #[test]
    fn only_a_definite_answer_turns_groups_off() {
        let table: [(Result<(), kube::Error>, &str); 7] = [
            (Ok(()), "yes"),
            (Err(api(404)), "no"),
            (Err(api(403)), "no"),
            (Err(api(500)), "unknown"),
            (Err(api(503)), "unknown"),
            (Err(api(429)), "unknown"),
            (Err(kube::Error::Service(Box::new(std::io::Error::other("connection reset")))), "unknown"),
        ];
        for (outcome, want) in table {
            let got = match served(outcome.as_ref().map(|_| ())) {
                Served::Yes => "yes",
                Served::No(_) => "no",
                Served::Unknown(_) => "unknown",
            };
            assert_eq!(got, want, "{outcome:?}");
        }
    }

    #[test]
    fn unknown_answers_are_asked_again_for_about_two_minutes() {
        let waits = retry_waits();
        assert_eq!(waits.first(), Some(&Duration::from_secs(1)));
        assert!(waits.iter().all(|w| *w <= Duration::from_secs(30)));
        assert_eq!(waits.iter().sum::<Duration>(), Duration::from_secs(121));
    }
}
