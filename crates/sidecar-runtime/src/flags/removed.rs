//! Flags upstream removed, refused one way in every sidecar: each is declared as a hidden argument whose value
//! parser is [`removed`], so the parser itself refuses it (in the single binary and in `csi-sidecars` alike) with
//! a message naming the flag and what replaced it, rather than as an unknown flag.
//!
//! ```ignore
//! /// Removed in 2.0.
//! #[arg(long, hide = true, num_args = 0..=1, require_equals = true, default_missing_value = "",
//!       value_parser = removed("use --leader-election"))]
//! pub enable_leader_election: Option<Removed>,
//! ```

/// The value of a removed flag: there is none, a parse that meets the flag fails.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Removed {}

/// A value parser that refuses every value of its flag, saying `why`.
pub fn removed(why: &'static str) -> impl Fn(&str) -> Result<Removed, String> + Clone + Send + Sync + 'static {
    move |_| Err(format!("the flag is no longer supported: {why}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, clap::Parser)]
    struct Flags {
        #[arg(long, default_value_t = false)]
        leader_election: bool,
        #[arg(long, hide = true, num_args = 0..=1, require_equals = true, default_missing_value = "",
              value_parser = removed("removed in 2.0; use --leader-election"))]
        enable_leader_election: Option<Removed>,
    }

    #[test]
    fn a_removed_flag_is_refused_in_every_form_naming_it_and_its_replacement() {
        for form in ["--enable-leader-election", "-enable-leader-election=true", "--enable-leader-election=false"] {
            let error = crate::flags::try_parse_from::<Flags, _, _>(["p", form]).expect_err(form).to_string();
            assert!(error.contains("--enable-leader-election"), "{form}: {error}");
            assert!(error.contains("no longer supported: removed in 2.0; use --leader-election"), "{form}: {error}");
        }
        let flags: Flags = crate::flags::try_parse_from(["p", "--leader-election"]).unwrap();
        assert!(flags.leader_election && flags.enable_leader_election.is_none());
    }
}
