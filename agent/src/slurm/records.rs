//! `scontrol -o` output → records: one line per record, `Key=Value` pairs separated by spaces.
//!
//! Values may themselves hold spaces (`OS=Linux 6.1.0 #1 SMP ...`, `Reason=test drain
//! [root@...]`), so a pair does not end at a space: it ends where the next `Key=` begins, a key
//! being a word of ASCII letters, digits, `_` or `:` that starts with a letter and follows a
//! space. Keys fedvol does not know are kept and ignored by the readers, so fields added by
//! later Slurm releases change nothing.

use std::collections::BTreeMap;

/// One record (`NodeName=...` or `PartitionName=...` line): its keys and values, in a map, and
/// the 1-based line it came from (for messages).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Record {
    /// 1-based line number in the command's output.
    pub line: usize,
    /// Every `Key=Value` pair; a key given twice keeps its first value.
    pub fields: BTreeMap<String, String>,
}

impl Record {
    /// The value of `key`, when present and not one of Slurm's "nothing" spellings (`(null)`,
    /// `N/A`, empty).
    pub fn get(&self, key: &str) -> Option<&str> {
        self.fields
            .get(key)
            .map(String::as_str)
            .filter(|v| !v.is_empty() && *v != "(null)" && *v != "N/A")
    }
}

/// True when `s` (the text after a space) starts with `Key=`.
fn key_at(s: &str) -> Option<usize> {
    let bytes = s.as_bytes();
    if !bytes.first().is_some_and(u8::is_ascii_alphabetic) {
        return None;
    }
    let end = bytes
        .iter()
        .position(|b| !(b.is_ascii_alphanumeric() || *b == b'_' || *b == b':'))?;
    (bytes[end] == b'=').then_some(end)
}

/// Splits one line into its pairs (see the module's rule). Text before the first key is
/// ignored.
pub fn parse_line(line: &str) -> BTreeMap<String, String> {
    let mut starts: Vec<(usize, usize)> = Vec::new(); // (key start, '=' position)
    let mut at_word_start = true;
    for (i, c) in line.char_indices() {
        if at_word_start && let Some(eq) = key_at(&line[i..]) {
            starts.push((i, i + eq));
        }
        at_word_start = c == ' ' || c == '\t';
    }
    let mut out = BTreeMap::new();
    for (n, (k, eq)) in starts.iter().enumerate() {
        let end = starts.get(n + 1).map_or(line.len(), |(next, _)| *next);
        let value = line[eq + 1..end].trim();
        out.entry(line[*k..*eq].to_string())
            .or_insert_with(|| value.to_string());
    }
    out
}

/// Every record of `text` (`scontrol -o show node` / `show partition` output): one per
/// non-empty line. Lines without any `Key=` (such as `No nodes in the system`) are skipped.
pub fn parse_records(text: &str) -> Vec<Record> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| Record {
            line: i + 1,
            fields: parse_line(l),
        })
        .filter(|r| !r.fields.is_empty())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_with_spaces_end_at_the_next_key() {
        let f = parse_line(
            "NodeName=n2 Arch=x86_64 OS=Linux 6.18.44 #1 SMP PREEMPT_DYNAMIC @0  RealMemory=4000 State=MIXED+DRAIN Reason=test drain [root@2026-11-24T22:58:25]",
        );
        assert_eq!(f["NodeName"], "n2");
        assert_eq!(f["OS"], "Linux 6.18.44 #1 SMP PREEMPT_DYNAMIC @0");
        assert_eq!(f["RealMemory"], "4000");
        assert_eq!(f["State"], "MIXED+DRAIN");
        assert_eq!(f["Reason"], "test drain [root@2026-11-24T22:58:25]");
    }

    #[test]
    fn empty_and_null_values_read_as_absent() {
        let r = Record {
            line: 1,
            fields: parse_line("NodeName=n1 Gres=(null) AllocTRES= Owner=N/A Port=1"),
        };
        assert_eq!(r.get("Gres"), None);
        assert_eq!(r.get("AllocTRES"), None);
        assert_eq!(r.get("Owner"), None);
        assert_eq!(r.get("Port"), Some("1"));
    }

    #[test]
    fn lines_without_keys_are_skipped() {
        let rs = parse_records("No nodes in the system\n\nNodeName=a CPUTot=2\n");
        assert_eq!(rs.len(), 1);
        assert_eq!(rs[0].line, 3);
    }

    #[test]
    fn captured_output_has_one_record_per_node() {
        let rs = parse_records(include_str!("testdata/nodes-22.05.8.txt"));
        let names: Vec<&str> = rs.iter().filter_map(|r| r.get("NodeName")).collect();
        assert_eq!(names, ["n1", "n2", "n3", "n4"]);
    }

    proptest::proptest! {
        /// Any text parses without a panic.
        #[test]
        fn any_text_parses(s in "\\PC*") {
            let _ = parse_records(&s);
        }
    }
}
