//! Where each existing persistent volume is, by provisioner and name: the lookup that answers
//! "is this name already taken on this provisioner?" (every new volume asks it once) without
//! walking all the inventory's volumes.
//!
//! Built once per inventory ([`super::prepared::Prepared`]) over its volumes at that time; an
//! inventory that has the same volumes first and more after (the agent appends the pending
//! volumes of its holds) is still answered: the volumes past the indexed ones are walked.
//! Whether an inventory still starts with the indexed volumes is checked by identity (the index
//! keeps the volumes it indexed alive, so an equal pointer is the same volume).

use std::sync::Arc;

use crate::model::{Inventory, PersistentVolume};

/// Every (provisioner, name) among an inventory's volumes, by hash.
#[derive(Debug, Clone, Default)]
pub struct VolumeNames {
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

impl VolumeNames {
    /// Indexes the volumes of `inv` (one pass and a sort).
    pub fn new(inv: &Inventory) -> Self {
        let mut by_hash: Vec<(u64, usize)> = inv
            .volumes
            .iter()
            .enumerate()
            .filter_map(|(i, v)| Some((hash(v.provisioner.as_deref()?, &v.name), i)))
            .collect();
        by_hash.sort_unstable();
        VolumeNames {
            volumes: inv.volumes.clone(),
            by_hash,
        }
    }

    /// True when `inv`'s volumes start with the indexed ones (the same volumes, by identity,
    /// in the same order); it may have more after them.
    pub fn covers(&self, inv: &Inventory) -> bool {
        inv.volumes.len() >= self.volumes.len() && self.volumes.iter().zip(&inv.volumes).all(|(a, b)| Arc::ptr_eq(a, b))
    }

    /// The index of `inv`, an inventory whose volumes are the indexed ones with those at
    /// positions `removed` (ascending) left out and any others replaced by volumes of the same
    /// provisioner and name (then volumes past them, walked by a lookup): what
    /// [`VolumeNames::new`] builds for it, made in one pass over the index without hashing or
    /// sorting (a removal shifts the later positions down; the order by hash, then position, is
    /// kept). Whether `inv` really is such an inventory is for [`VolumeNames::covers`] to say.
    /// A what-if leaves a live commit's own volumes out of its cluster this way for each
    /// decision it plans (`whatif::own::without`).
    pub fn edited(&self, inv: &Inventory, removed: &[usize]) -> VolumeNames {
        let indexed = self.volumes.len();
        let kept = indexed - removed.iter().filter(|r| **r < indexed).count();
        let volumes = inv.volumes.get(..kept).unwrap_or(&inv.volumes).to_vec();
        let by_hash = if removed.is_empty() {
            self.by_hash.clone()
        } else {
            let shift = |i: usize| removed.partition_point(|r| *r < i);
            self.by_hash
                .iter()
                .filter(|(_, i)| removed.binary_search(i).is_err())
                .map(|&(h, i)| (h, i - shift(i)))
                .collect()
        };
        VolumeNames { volumes, by_hash }
    }

    /// The first volume of `inv` named `name` on `provisioner`, as a walk over all of `inv`'s
    /// volumes finds it; `inv` must be [covered](VolumeNames::covers). The indexed volumes are
    /// looked up, the ones after them walked.
    pub fn find<'a>(&self, inv: &'a Inventory, provisioner: &str, name: &str) -> Option<&'a PersistentVolume> {
        let is = |v: &PersistentVolume| v.name == name && v.provisioner.as_deref() == Some(provisioner);
        let h = hash(provisioner, name);
        let from = self.by_hash.partition_point(|(k, _)| *k < h);
        let same_hash = self.by_hash.get(from..).unwrap_or_default();
        for (_, i) in same_hash.iter().take_while(|(k, _)| *k == h) {
            if let Some(v) = inv.volumes.get(*i)
                && is(v)
            {
                return Some(&**v);
            }
        }
        inv.volumes
            .get(self.volumes.len()..)
            .unwrap_or_default()
            .iter()
            .find(|v| is(v))
            .map(|v| &**v)
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
        assert_eq!(index.by_hash, fresh.by_hash);
        for v in &inv.volumes {
            for p in ["prov-0", "prov-1", "prov-2"] {
                let (a, b) = (index.find(&edited, p, &v.name), walk(&edited, p, &v.name));
                assert_eq!(a.map(|v| v as *const _), b.map(|v| v as *const _), "{p} {}", v.name);
            }
        }
        assert_eq!(names.edited(&inv, &[]).by_hash, names.by_hash);
    }
}
