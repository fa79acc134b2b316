//! API errors as users see them in events and statuses.

/// The text of an API error as client-go prints it: the Status message for an error the API server answered, the
/// error itself otherwise.
pub fn api_error_text(error: &kube::Error) -> String {
    match error {
        kube::Error::Api(status) => status.message.clone(),
        other => other.to_string(),
    }
}

/// Whether the API server answered 404: the object (or its kind) is not there.
pub fn is_not_found(error: &kube::Error) -> bool {
    api_code(error) == Some(404)
}

/// Whether the API server answered 409, whatever the reason: a stale resourceVersion, or a name already taken.
pub fn is_conflict(error: &kube::Error) -> bool {
    api_code(error) == Some(409)
}

/// Whether the API server answered 409 with reason AlreadyExists: a create found the name taken.
pub fn is_already_exists(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if status.code == 409 && status.reason == "AlreadyExists")
}

/// Whether the API server answered 403: this identity may not do that.
pub fn is_forbidden(error: &kube::Error) -> bool {
    api_code(error) == Some(403)
}

/// The HTTP code of an error the API server answered; `None` for any other error.
fn api_code(error: &kube::Error) -> Option<u16> {
    match error {
        kube::Error::Api(status) => Some(status.code),
        _ => None,
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

    fn api(code: u16, reason: &str) -> kube::Error {
        kube::Error::Api(kube::core::Status::failure("message", reason).with_code(code).boxed())
    }

    #[test]
    fn each_answer_is_read_by_its_code() {
        // (case, error, not found, conflict, already exists, forbidden)
        let table = [
            ("404 NotFound", api(404, "NotFound"), true, false, false, false),
            ("404 of any reason", api(404, ""), true, false, false, false),
            ("409 Conflict", api(409, "Conflict"), false, true, false, false),
            ("409 AlreadyExists", api(409, "AlreadyExists"), false, true, true, false),
            ("AlreadyExists needs 409", api(400, "AlreadyExists"), false, false, false, false),
            ("403 Forbidden", api(403, "Forbidden"), false, false, false, true),
            ("500", api(500, "InternalError"), false, false, false, false),
            ("not an API answer", kube::Error::LinesCodecMaxLineLengthExceeded, false, false, false, false),
        ];
        for (case, error, not_found, conflict, already_exists, forbidden) in table {
            assert_eq!(is_not_found(&error), not_found, "{case}: not found");
            assert_eq!(is_conflict(&error), conflict, "{case}: conflict");
            assert_eq!(is_already_exists(&error), already_exists, "{case}: already exists");
            assert_eq!(is_forbidden(&error), forbidden, "{case}: forbidden");
        }
    }

    #[test]
    fn an_api_error_retries_with_the_servers_message() {
        let status = kube::core::Status::failure("the object has been modified", "Conflict").with_code(409);
        let Retry(text) = Retry::from(kube::Error::Api(Box::new(status)));
        assert_eq!(text, "the object has been modified");
    }
}
