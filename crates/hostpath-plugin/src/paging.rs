//! Paging for ListVolumes and ListSnapshots.
//!
//! Entries are listed in creation order and a token is the creation sequence number of the first entry
//! of the next page. Unlike an index, such a token stays valid when entries of earlier pages are
//! deleted, and entries created between two pages show up on a later page.

use tonic::Status;

/// One page of `entries` (each with its creation sequence, in any order). `max_entries` 0 means all.
/// Returns the page and the token for the next one (empty when this page is the last).
pub fn page<T>(
    mut entries: Vec<(u64, T)>,
    max_entries: i32,
    starting_token: &str,
    next_sequence: u64,
) -> Result<(Vec<T>, String), Status> {
    if max_entries < 0 {
        return Err(Status::invalid_argument(format!("max_entries {max_entries} is negative")));
    }
    let start = if starting_token.is_empty() {
        0
    } else {
        starting_token
            .parse::<u64>()
            .ok()
            .filter(|s| *s <= next_sequence && starting_token.bytes().all(|b| b.is_ascii_digit()))
            .ok_or_else(|| {
                Status::aborted(format!("starting_token {starting_token:?} was not issued by this plugin"))
            })?
    };
    entries.sort_by_key(|(sequence, _)| *sequence);
    let mut remaining = entries.into_iter().filter(|(sequence, _)| *sequence >= start).peekable();
    let limit = if max_entries == 0 { usize::MAX } else { max_entries as usize };
    let page: Vec<T> = remaining.by_ref().take(limit).map(|(_, entry)| entry).collect();
    let next_token = remaining.peek().map(|(sequence, _)| sequence.to_string()).unwrap_or_default();
    Ok((page, next_token))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_in_creation_order() {
        let entries = || vec![(5, "e"), (1, "a"), (3, "c"), (2, "b")];
        type Case = (i32, &'static str, Result<(Vec<&'static str>, &'static str), tonic::Code>);
        let cases: Vec<Case> = vec![
            (0, "", Ok((vec!["a", "b", "c", "e"], ""))),
            (2, "", Ok((vec!["a", "b"], "3"))),
            (2, "3", Ok((vec!["c", "e"], ""))),
            (1, "4", Ok((vec!["e"], ""))),
            (4, "", Ok((vec!["a", "b", "c", "e"], ""))),
            (0, "6", Ok((vec![], ""))),
            (0, "7", Err(tonic::Code::Aborted)),
            (0, "invalid-token", Err(tonic::Code::Aborted)),
            (0, "+3", Err(tonic::Code::Aborted)),
            (-1, "", Err(tonic::Code::InvalidArgument)),
        ];
        for (max, token, want) in cases {
            let got = page(entries(), max, token, 6);
            match (got, want) {
                (Ok((page, next)), Ok((want_page, want_next))) => {
                    assert_eq!((page, next.as_str()), (want_page, want_next), "max {max} token {token:?}")
                }
                (Err(status), Err(code)) => assert_eq!(status.code(), code, "max {max} token {token:?}"),
                (got, want) => panic!("max {max} token {token:?}: got {got:?}, want {want:?}"),
            }
        }
    }
}
