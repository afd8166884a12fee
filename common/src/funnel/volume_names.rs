//! Where each existing persistent volume is, by provisioner and name: the lookup that answers
//! "is this name already taken on this provisioner?" (every new volume asks it once) without
//! walking all the inventory's volumes.
//!
//! Built once per inventory ([`super::prepared::Prepared`]) over its volumes at that time; an
//! inventory that has the same volumes first and more after (the agent appends the pending
//! volumes of its holds) is still answered: the volumes past the indexed ones are walked.
//! Whether an inventory still starts with the indexed volumes is checked by identity (the index
//! keeps the volumes it indexed alive, so an equal pointer is the same volume).
//!
//! The agent's inventory holds, after the inventory's own volumes, the volumes it made or
//! bound, sorted by provisioner and name, one each (`agent::state::merged`); it gains one with
//! every commit, in the middle of that run as often as not. An index over them would be
//! invalid after the next commit, and walking them made a plan's cost grow with every volume
//! the agent ever made (a quarter of a commit by 10,000 commits at 100 hosts). So the agent
//! indexes its inventory's own volumes only, and says where the sorted run lies
//! ([`super::prepared::Prepared::refreshed_sorted`]): a lookup searches that run by halves.

use std::cmp::Ordering;
use std::sync::Arc;

use crate::model::{Inventory, PersistentVolume};

/// Every (provisioner, name) among an inventory's first volumes, by hash, and where the
/// volumes after them run sorted (module docs).
#[derive(Debug, Clone, Default)]
pub struct VolumeNames {
    /// The index, shared by the prepared forms refreshed from one another.
    index: Arc<Index>,
    /// The volumes from the indexed ones up to this position run sorted by provisioner, then
    /// name (the bytes of `<provisioner> U+001F <name>`), each (provisioner, name) once: as the
    /// caller of [`VolumeNames::with_sorted_run`] vouched for the inventory it was made for.
    /// No run when it is not past the indexed volumes.
    sorted_end: usize,
}

/// The hash index of the first volumes of an inventory.
#[derive(Debug, Default)]
struct Index {
    /// The volumes indexed, in inventory order.
    volumes: Vec<Arc<PersistentVolume>>,
    /// (hash of provisioner and name, position in `volumes`), sorted: the volumes sharing a
    /// hash are together, in inventory order. Volumes without a provisioner are left out (a
    /// lookup names a provisioner).
    by_hash: Vec<(u64, usize)>,
}

/// FNV-1a (Fowler, Noll and Vo's public-domain hash, 64-bit) of `provisioner`, a separator
/// byte no name contains (0xff is never in UTF-8), and `name`.
fn hash(provisioner: &str, name: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in provisioner.bytes().chain([0xff]).chain(name.bytes()) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// The order of a sorted run: `v`'s provisioner (empty for none), U+001F, its name, as bytes,
/// against `provisioner`, U+001F, `name` (the order of the agent's volume record keys).
fn run_order(v: &PersistentVolume, provisioner: &str, name: &str) -> Ordering {
    let key = v
        .provisioner
        .as_deref()
        .unwrap_or("")
        .bytes()
        .chain([0x1f])
        .chain(v.name.bytes());
    key.cmp(provisioner.bytes().chain([0x1f]).chain(name.bytes()))
}

impl VolumeNames {
    /// Indexes the volumes of `inv` (one pass and a sort).
    pub fn new(inv: &Inventory) -> Self {
        VolumeNames::of_first(inv, inv.volumes.len())
    }

    /// Indexes the first `n` volumes of `inv` (all of them when it has fewer).
    pub fn of_first(inv: &Inventory, n: usize) -> Self {
        let first = inv.volumes.get(..n).unwrap_or(&inv.volumes);
        let mut by_hash: Vec<(u64, usize)> = first
            .iter()
            .enumerate()
            .filter_map(|(i, v)| Some((hash(v.provisioner.as_deref()?, &v.name), i)))
            .collect();
        by_hash.sort_unstable();
        VolumeNames {
            index: Arc::new(Index {
                volumes: first.to_vec(),
                by_hash,
            }),
            sorted_end: 0,
        }
    }

    /// The number of volumes indexed.
    pub fn indexed(&self) -> usize {
        self.index.volumes.len()
    }

    /// Where the sorted run after the indexed volumes ends (no run when not past them).
    pub fn run_end(&self) -> usize {
        self.sorted_end
    }

    /// The same index, the volumes from the indexed ones up to position `end` taken as a
    /// sorted run: the caller vouches that in the inventory it will look up (and only that
    /// one), they run sorted by provisioner, then name (the bytes of `<provisioner> U+001F
    /// <name>`, an empty provisioner for none), each once. Without a run, every volume past
    /// the indexed ones is walked.
    pub fn with_sorted_run(&self, end: usize) -> Self {
        VolumeNames {
            index: self.index.clone(),
            sorted_end: end,
        }
    }

    /// True when `inv`'s volumes start with the indexed ones (the same volumes, by identity,
    /// in the same order); it may have more after them.
    pub fn covers(&self, inv: &Inventory) -> bool {
        let indexed = &self.index.volumes;
        inv.volumes.len() >= indexed.len() && indexed.iter().zip(&inv.volumes).all(|(a, b)| Arc::ptr_eq(a, b))
    }

    /// The index of `inv`, an inventory whose volumes are the indexed ones with those at
    /// positions `removed` (ascending) left out and any others replaced by volumes of the same
    /// provisioner and name (then volumes past them, walked by a lookup): what
    /// [`VolumeNames::new`] builds for it, made in one pass over the index without hashing or
    /// sorting (a removal shifts the later positions down; the order by hash, then position, is
    /// kept). Whether `inv` really is such an inventory is for [`VolumeNames::covers`] to say.
    /// A what-if leaves a live commit's own volumes out of its cluster this way for each
    /// decision it plans (`whatif::own::without`). No sorted run is kept.
    pub fn edited(&self, inv: &Inventory, removed: &[usize]) -> VolumeNames {
        let indexed = self.indexed();
        let kept = indexed - removed.iter().filter(|r| **r < indexed).count();
        let volumes = inv.volumes.get(..kept).unwrap_or(&inv.volumes).to_vec();
        let by_hash = if removed.is_empty() {
            self.index.by_hash.clone()
        } else {
            let shift = |i: usize| removed.partition_point(|r| *r < i);
            self.index
                .by_hash
                .iter()
                .filter(|(_, i)| removed.binary_search(i).is_err())
                .map(|&(h, i)| (h, i - shift(i)))
                .collect()
        };
        VolumeNames {
            index: Arc::new(Index { volumes, by_hash }),
            sorted_end: 0,
        }
    }

    /// The first volume of `inv` named `name` on `provisioner`, as a walk over all of `inv`'s
    /// volumes finds it; `inv` must be [covered](VolumeNames::covers), and be the inventory
    /// a sorted run was vouched for. The indexed volumes are looked up, the sorted run after
    /// them searched by halves, the volumes after it walked.
    pub fn find<'a>(&self, inv: &'a Inventory, provisioner: &str, name: &str) -> Option<&'a PersistentVolume> {
        let is = |v: &PersistentVolume| v.name == name && v.provisioner.as_deref() == Some(provisioner);
        let h = hash(provisioner, name);
        let by_hash = &self.index.by_hash;
        let from = by_hash.partition_point(|(k, _)| *k < h);
        let same_hash = by_hash.get(from..).unwrap_or_default();
        for (_, i) in same_hash.iter().take_while(|(k, _)| *k == h) {
            if let Some(v) = inv.volumes.get(*i)
                && is(v)
            {
                return Some(&**v);
            }
        }
        let rest = inv.volumes.get(self.indexed()..).unwrap_or_default();
        let (run, after) = rest.split_at(self.sorted_end.saturating_sub(self.indexed()).min(rest.len()));
        // A run holds each (provisioner, name) once: the one with the key, if it matches, is
        // the first match a walk of the run finds, and no other volume of the run matches.
        if let Ok(i) = run.binary_search_by(|v| run_order(v, provisioner, name))
            && is(&run[i])
        {
            return Some(&*run[i]);
        }
        after.iter().find(|v| is(v)).map(|v| &**v)
    }

    /// True when the volumes of `inv` from the indexed ones up to `end` run sorted as
    /// [`VolumeNames::with_sorted_run`] needs (each strictly after the one before): what a
    /// caller's tests hold it to.
    pub fn runs_sorted(&self, inv: &Inventory, end: usize) -> bool {
        let run = inv.volumes.get(self.indexed()..end).unwrap_or_default();
        run.windows(2).all(|w| {
            let next = &w[1];
            run_order(&w[0], next.provisioner.as_deref().unwrap_or(""), &next.name) == Ordering::Less
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synth::{SynthSizes, cluster};

    fn walk<'a>(inv: &'a Inventory, p: &str, name: &str) -> Option<&'a PersistentVolume> {
        inv.volumes
            .iter()
            .find(|v| v.name == name && v.provisioner.as_deref() == Some(p))
            .map(|v| &**v)
    }

    #[test]
    fn finds_what_a_walk_finds_with_volumes_appended_after_indexing() {
        let mut inv = cluster(
            "c",
            SynthSizes {
                hosts: 1,
                provisioners: 3,
                volumes: 30,
            },
        );
        let names = VolumeNames::new(&inv);
        let mut pending = (*inv.volumes[4]).clone();
        pending.name = "pending-1".into();
        inv.volumes.push(Arc::new(pending));
        let mut twin = (*inv.volumes[5]).clone();
        twin.capacity.0 += 1;
        inv.volumes.push(Arc::new(twin));
        assert!(names.covers(&inv));
        for p in ["prov-0", "prov-1", "prov-2", "prov-9"] {
            for n in ["vol-4", "vol-5", "vol-29", "pending-1", "vol-30"] {
                let (a, b) = (names.find(&inv, p, n), walk(&inv, p, n));
                assert_eq!(a.map(|v| v as *const _), b.map(|v| v as *const _), "{p} {n}");
            }
        }
        assert!(names.find(&inv, "prov-1", "pending-1").is_some());
        inv.volumes.remove(0);
        assert!(!names.covers(&inv), "a removed volume shifts the rest");
    }

    /// With a sorted run after the indexed volumes (the agent's managed volumes), then more
    /// walked (its holds' pending volumes), every lookup finds what a walk finds: names in
    /// the indexed part, in the run (first, middle, last), in the tail, in several, and none.
    #[test]
    fn a_sorted_run_is_searched_and_finds_what_a_walk_finds() {
        let mut inv = cluster(
            "c",
            SynthSizes {
                hosts: 1,
                provisioners: 3,
                volumes: 20,
            },
        );
        let indexed = inv.volumes.len();
        let like = |inv: &Inventory, p: Option<&str>, name: &str| {
            let mut v = (*inv.volumes[0]).clone();
            v.provisioner = p.map(str::to_string);
            v.name = name.to_string();
            Arc::new(v)
        };
        // The run, sorted by provisioner then name (`prov` sorts before `prov-0`, and no
        // provisioner before any), each once; one shares its name with an indexed volume.
        let run = [
            (None, "classless"),
            (Some("prov"), "zz"),
            (Some("prov-0"), "a"),
            (Some("prov-0"), "vol-3"),
            (Some("prov-0"), "vol-30"),
            (Some("prov-1"), "m"),
            (Some("prov-2"), "z"),
        ];
        for (p, n) in run {
            let v = like(&inv, p, n);
            inv.volumes.push(v);
        }
        let end = inv.volumes.len();
        for (p, n) in [(Some("prov-1"), "pending"), (Some("prov-0"), "a")] {
            let v = like(&inv, p, n);
            inv.volumes.push(v);
        }
        let names = VolumeNames::of_first(&inv, indexed).with_sorted_run(end);
        assert!(names.covers(&inv) && names.runs_sorted(&inv, end));
        assert!(
            !names.runs_sorted(&inv, end + 2),
            "the pending volumes do not continue the run"
        );
        let mut asked: Vec<(String, String)> = inv
            .volumes
            .iter()
            .map(|v| (v.provisioner.clone().unwrap_or_default(), v.name.clone()))
            .collect();
        for (p, n) in [
            ("prov-0", "b"),
            ("prov-3", "m"),
            ("", "classless"),
            ("prov", "zz"),
            ("prov-2", "zzz"),
        ] {
            asked.push((p.to_string(), n.to_string()));
        }
        for (p, n) in &asked {
            let (a, b) = (names.find(&inv, p, n), walk(&inv, p, n));
            assert_eq!(a.map(|v| v as *const _), b.map(|v| v as *const _), "{p} {n}");
        }
        assert!(names.find(&inv, "prov-2", "z").is_some() && names.find(&inv, "prov-1", "pending").is_some());
    }

    /// An edited index (volumes left out, one replaced by another of the same name) answers
    /// every lookup as an index built afresh on the edited list, and as a walk.
    #[test]
    fn an_edited_index_is_the_index_of_the_edited_list() {
        let inv = cluster(
            "c",
            SynthSizes {
                hosts: 1,
                provisioners: 3,
                volumes: 40,
            },
        );
        let names = VolumeNames::new(&inv);
        let removed = [0, 7, 8, 39];
        let mut again = (*inv.volumes[12]).clone();
        again.capacity.0 += 1;
        let replaced = [(12, Arc::new(again))];
        let mut edited = inv.clone();
        edited.volumes = inv
            .volumes
            .iter()
            .enumerate()
            .filter(|(i, _)| !removed.contains(i))
            .map(|(i, v)| if i == 12 { replaced[0].1.clone() } else { v.clone() })
            .collect();
        let index = names.edited(&edited, &removed);
        assert!(index.covers(&edited));
        let fresh = VolumeNames::new(&edited);
        assert_eq!(index.index.by_hash, fresh.index.by_hash);
        for v in &inv.volumes {
            for p in ["prov-0", "prov-1", "prov-2"] {
                let (a, b) = (index.find(&edited, p, &v.name), walk(&edited, p, &v.name));
                assert_eq!(a.map(|v| v as *const _), b.map(|v| v as *const _), "{p} {}", v.name);
            }
        }
        assert_eq!(names.edited(&inv, &[]).index.by_hash, names.index.by_hash);
    }
}
