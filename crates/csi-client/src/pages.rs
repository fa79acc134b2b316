//! Following a driver's `next_token` through a paged listing (ListVolumes, ControllerListVolumeHealth). The token
//! is the driver's answer, so untrusted: a token given before would repeat the listing forever, so it ends it.

use std::collections::HashSet;

/// The tokens of one listing so far.
#[derive(Debug, Default)]
pub struct Pages {
    seen: HashSet<String>,
}

impl Pages {
    /// The token to ask the next page with: `Ok(None)` once the driver gives none, `Err` when it gives one it gave
    /// before in this listing.
    pub fn next(&mut self, next_token: String) -> Result<Option<String>, String> {
        if next_token.is_empty() {
            return Ok(None);
        }
        if !self.seen.insert(next_token.clone()) {
            return Err(format!("the driver gave the page token {next_token:?} twice in one listing"));
        }
        Ok(Some(next_token))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listing_ends_on_an_empty_token_or_a_repeated_one() {
        // (case, tokens the driver answers, the outcome of the last)
        type Row<'a> = (&'a str, &'a [&'a str], Result<Option<&'a str>, ()>);
        let table: &[Row] = &[
            ("one page", &[""], Ok(None)),
            ("three pages", &["a", "b", ""], Ok(None)),
            ("a new token goes on", &["a"], Ok(Some("a"))),
            ("the same token again", &["a", "a"], Err(())),
            ("an earlier token again", &["a", "b", "a"], Err(())),
        ];
        for (case, tokens, want) in table {
            let mut pages = Pages::default();
            let mut last = Ok(None);
            for token in *tokens {
                last = pages.next(token.to_string());
            }
            let got = last.as_ref().map(|t| t.as_deref()).map_err(|_| ());
            assert_eq!(got, *want, "{case}");
        }
    }
}
