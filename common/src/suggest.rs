//! "Did you mean" suggestions: the candidate name closest to a word a user misspelled.
//!
//! Used by the file readers (an unknown field, provisioner or zone name) and by the funnel's
//! volume stages (a named volume or storage class that does not exist).

/// The closest candidate to `word` (Jaro-Winkler similarity >= 0.8), for "did you mean" hints.
pub fn closest<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let lw = word.to_ascii_lowercase();
    candidates
        .into_iter()
        .map(|c| (strsim::jaro_winkler(&lw, &c.to_ascii_lowercase()), c))
        .filter(|(score, _)| *score >= 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, c)| c)
}
