//! Request ids a user can copy: shown whole while there is room, else as the shortest start
//! that no other known id shares, as Nomad's CLI shows allocation ids by their unique prefix.
//! Every command that takes a request id accepts such a start
//! ([`crate::cli::ask::resolve_id`]).

/// The shortest start of an id worth showing: shorter ones are hard to tell apart by eye.
pub const MIN_PREFIX: usize = 8;

/// For each of `shown`, the shortest start of it, at least [`MIN_PREFIX`] characters (or the
/// whole id when shorter), that is not the start of any other id of `known` (the ids of `shown`
/// count as known). An id that is itself the start of another is shown whole: the commands
/// take an exact id before a prefix.
pub fn unique_prefixes<'a>(shown: &[&'a str], known: &[&str]) -> Vec<&'a str> {
    shown
        .iter()
        .map(|id| {
            let others = known.iter().chain(shown.iter()).filter(|o| *o != id);
            // The longest start `id` shares with any other, in characters.
            let shared = others
                .map(|o| id.chars().zip(o.chars()).take_while(|(a, b)| a == b).count())
                .max()
                .unwrap_or(0);
            let want = (shared + 1).max(MIN_PREFIX);
            match id.char_indices().nth(want) {
                Some((end, _)) => &id[..end],
                None => id,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_are_the_shortest_unique_starts() {
        let ids = [
            "gpu-soft-constraints-vsmvA1",
            "gpu-soft-constraints-vsmvB2",
            "gpu-soft-constraints-x9",
            "scratch-fast-qRkK3buwehCKiKy8LTzTO2",
        ];
        let p = unique_prefixes(&ids, &[]);
        assert_eq!(
            p,
            [
                "gpu-soft-constraints-vsmvA",
                "gpu-soft-constraints-vsmvB",
                "gpu-soft-constraints-x",
                "scratch-"
            ]
        );
        // A hidden id counts: the prefix stays unique among every known one.
        let p = unique_prefixes(&ids[3..], &["scratch-fast-qRkK3zz"]);
        assert_eq!(p, ["scratch-fast-qRkK3b"]);
        // An id that starts another is shown whole; short ids are shown whole.
        assert_eq!(unique_prefixes(&["abc", "abcdef0123"], &[]), ["abc", "abcdef01"]);
    }
}
