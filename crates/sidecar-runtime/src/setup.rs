//! Why a sidecar could not start, for the library entry each sidecar crate offers (`start`), which the single
//! binaries and `csi-sidecars` call alike. `main.rs` turns it into the process's error; the text is the one the
//! binaries printed when their wiring lived in `main.rs`.

type BoxError = Box<dyn std::error::Error + Send + Sync>;

#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// A step that failed, named as the logs name it (`GetPluginCapabilities`), with its cause.
    #[error("{step}")]
    Step {
        step: &'static str,
        #[source]
        source: BoxError,
    },
    /// A refusal whose own message says it all (a bad flag, a driver without the needed capability).
    #[error(transparent)]
    Refused(BoxError),
}

/// `.step("NodeGetInfo")?` and `.refused()?` on any error.
pub trait SetupResult<T> {
    fn step(self, step: &'static str) -> Result<T, SetupError>;
    fn refused(self) -> Result<T, SetupError>;
}

impl<T, E: std::error::Error + Send + Sync + 'static> SetupResult<T> for Result<T, E> {
    fn step(self, step: &'static str) -> Result<T, SetupError> {
        self.map_err(|err| SetupError::Step { step, source: Box::new(err) })
    }

    fn refused(self) -> Result<T, SetupError> {
        self.map_err(|err| SetupError::Refused(Box::new(err)))
    }
}

impl SetupError {
    /// A refusal with only a message.
    pub fn message(message: impl Into<String>) -> SetupError {
        SetupError::Refused(message.into().into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_text_is_the_step_then_the_cause() {
        let failed: Result<(), std::io::Error> = Err(std::io::Error::other("socket closed"));
        let err = failed.step("NodeGetInfo").unwrap_err();
        assert_eq!(err.to_string(), "NodeGetInfo");
        assert_eq!(std::error::Error::source(&err).unwrap().to_string(), "socket closed");
        let refused: Result<(), std::io::Error> = Err(std::io::Error::other("no expansion"));
        assert_eq!(refused.refused().unwrap_err().to_string(), "no expansion");
        assert_eq!(SetupError::message("no snapshots").to_string(), "no snapshots");
    }
}
