//! API errors as users see them in events and statuses.

/// The text of an API error as client-go prints it: the Status message for an error the API server answered, the
/// error itself otherwise.
pub fn api_error_text(error: &kube::Error) -> String {
    match error {
        kube::Error::Api(status) => status.message.clone(),
        other => other.to_string(),
    }
}
