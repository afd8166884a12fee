//! Hosts' capability tags interned as sets: every distinct list of tags a host carries gets a
//! small number, and each host keeps only that number. A job's hard and soft constraints (and
//! resource annotations) are then judged once per distinct set, and a host's answer is a lookup
//! (Nomad's `ConstraintChecker` judges a node's attributes per node; hosts of one cluster mostly
//! share a handful of tag lists, so judging the lists is the same answer for far less work).
//!
//! Built once per inventory ([`super::prepared::Prepared`]); a set keeps its tags in the order
//! the first host carrying them listed them, and lists that differ only in order are different
//! sets (the answers do not depend on order either way).

use std::collections::HashMap;

use crate::model::{Inventory, Tag};

/// The distinct tag lists of an inventory's hosts and, per host (inventory order, zone by zone),
/// the number of its list.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TagSets {
    /// Distinct tag lists, numbered by position.
    sets: Vec<Vec<Tag>>,
    /// Per host, in inventory order: the number of its tag list in `sets`.
    of_host: Vec<u32>,
}

impl TagSets {
    /// Interns the tags of every host of `inv` (one pass; one hash lookup per host).
    pub fn new(inv: &Inventory) -> Self {
        let mut interner = Interner::default();
        for h in inv.zones.iter().flat_map(|z| &z.hosts) {
            interner.push(&h.tags);
        }
        interner.finish()
    }

    /// The number of the tag list of host `at` (its position in inventory order); 0 for a
    /// position past the end.
    pub fn of(&self, at: usize) -> u32 {
        self.of_host.get(at).copied().unwrap_or(0)
    }

    /// Hosts counted.
    pub fn hosts(&self) -> usize {
        self.of_host.len()
    }

    /// Judges every distinct tag list with `width` tests: `test(k, tag)` is true when `tag`
    /// meets test `k`. Answer for list `s` and test `k`: `answers.met(s, k)`, true when any tag
    /// of the list meets test `k`.
    pub fn judge(&self, width: usize, test: impl Fn(usize, &Tag) -> bool) -> Answers {
        let mut met = Vec::with_capacity(self.sets.len() * width);
        for set in &self.sets {
            met.extend((0..width).map(|k| set.iter().any(|tag| test(k, tag))));
        }
        Answers { width, met }
    }
}

/// Builds [`TagSets`] host by host, in inventory order.
#[derive(Debug, Default)]
pub struct Interner<'a> {
    ids: HashMap<&'a [Tag], u32>,
    sets: TagSets,
}

impl<'a> Interner<'a> {
    /// Adds the next host, carrying `tags`.
    pub fn push(&mut self, tags: &'a [Tag]) {
        let sets = &mut self.sets.sets;
        let id = *self.ids.entry(tags).or_insert_with(|| {
            sets.push(tags.to_vec());
            u32::try_from(sets.len() - 1).unwrap_or(u32::MAX)
        });
        self.sets.of_host.push(id);
    }

    /// The tag sets of the hosts pushed.
    pub fn finish(self) -> TagSets {
        self.sets
    }
}

/// Per distinct tag list, per test: whether one of its tags meets the test ([`TagSets::judge`]).
#[derive(Debug, Clone, Default)]
pub struct Answers {
    width: usize,
    met: Vec<bool>,
}

impl Answers {
    /// True when a tag of list `set` meets test `k` (false for numbers out of range).
    pub fn met(&self, set: u32, k: usize) -> bool {
        k < self.width && self.met.get(set as usize * self.width + k).copied().unwrap_or(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synth::{SynthSizes, cluster};

    #[test]
    fn hosts_with_the_same_tags_share_a_set_and_answers_match_the_tags() {
        let inv = cluster(
            "c",
            SynthSizes {
                hosts: 30,
                provisioners: 1,
                volumes: 0,
            },
        );
        let sets = TagSets::new(&inv);
        assert_eq!(sets.hosts(), 30);
        assert_eq!(sets.sets.len(), 2, "synthetic hosts carry `gpu` or nothing");
        let gpu = |t: &Tag| t.key == "gpu";
        let answers = sets.judge(1, |_, t| gpu(t));
        for (at, h) in inv.zones.iter().flat_map(|z| &z.hosts).enumerate() {
            assert_eq!(answers.met(sets.of(at), 0), h.tags.iter().any(gpu), "{}", h.name);
        }
        assert!(!answers.met(0, 1), "a test that was not asked is not met");
    }
}
