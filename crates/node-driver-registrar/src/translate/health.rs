//! What `/healthz` answers, from what it found at the registration socket, as upstream's handler does: 200 `ok`
//! when the socket answers GetInfo with the driver's name, 404 when there is no socket, 500 with the reason
//! otherwise.

/// What the health check found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SocketCheck {
    /// No file at the socket's path.
    Missing,
    /// The path could not be inspected, or holds something that is not a socket.
    Unusable(String),
    /// The socket could not be dialled or GetInfo failed.
    Unreachable(String),
    /// GetInfo answered with this plugin name.
    Answered { name: String },
}

/// An HTTP answer: status code and body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    pub status: u16,
    pub body: String,
}

pub fn answer(check: &SocketCheck, driver: &str) -> Answer {
    let answer = |status: u16, body: String| Answer { status, body };
    match check {
        SocketCheck::Missing => answer(404, "registration socket does not exist".into()),
        SocketCheck::Unusable(reason) => answer(500, reason.clone()),
        SocketCheck::Unreachable(reason) => answer(500, reason.clone()),
        SocketCheck::Answered { name } if name == driver => answer(200, "ok".into()),
        SocketCheck::Answered { name } => answer(500, format!("invalid driver name {name}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_like_upstream() {
        let driver = "hostpath.csi.k8s.io";
        let table = [
            (SocketCheck::Answered { name: driver.into() }, 200, "ok"),
            (SocketCheck::Answered { name: "other.csi".into() }, 500, "invalid driver name other.csi"),
            (SocketCheck::Missing, 404, "registration socket does not exist"),
            (SocketCheck::Unusable("x is not a socket".into()), 500, "x is not a socket"),
            (SocketCheck::Unreachable("connection refused".into()), 500, "connection refused"),
        ];
        for (check, status, body) in table {
            assert_eq!(answer(&check, driver), Answer { status, body: body.into() }, "{check:?}");
        }
    }
}
