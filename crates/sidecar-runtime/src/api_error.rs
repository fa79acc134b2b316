//! API errors as users see them in events and statuses.

/// The text of an API error as client-go prints it: the Status message for an error the API server answered, the
/// error itself otherwise.
pub fn api_error_text(error: &kube::Error) -> String {
    match error {
        kube::Error::Api(status) => status.message.clone(),
        other => other.to_string(),
    }
}

/// Why a controller's sync stopped, so that its key goes back to the queue with backoff: the text is logged (an API
/// error reads as [`api_error_text`] prints it).
#[derive(Debug)]
pub struct Retry(pub String);

impl From<kube::Error> for Retry {
    fn from(error: kube::Error) -> Retry {
        Retry(api_error_text(&error))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_api_error_retries_with_the_servers_message() {
        let status = kube::core::Status::failure("the object has been modified", "Conflict").with_code(409);
        let Retry(text) = Retry::from(kube::Error::Api(Box::new(status)));
        assert_eq!(text, "the object has been modified");
    }
}
