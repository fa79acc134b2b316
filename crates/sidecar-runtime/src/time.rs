//! The current time as Kubernetes objects record it.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

/// Now, as the `Time` of a status or an event.
pub fn now() -> Time {
    Time(k8s_openapi::jiff::Timestamp::now())
}

#[cfg(test)]
mod tests {
    use k8s_openapi::jiff::Timestamp;

    use super::*;

    #[test]
    fn now_is_the_wall_clock() {
        let before = Timestamp::now();
        let Time(now) = now();
        assert!(before <= now && now <= Timestamp::now());
    }
}
