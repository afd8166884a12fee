//! The merged volume list kept change by change ([`Merged`]): the inventory's volumes with the
//! managed ones merged in, exactly as [`Ledger::merged_volumes`] builds it, but edited for the
//! volumes a change touched instead of built again. Building it walked every volume record the
//! agent keeps (a hash lookup each) after every commit and completion; under sustained submits
//! that was the largest share of an agent's CPU outside the funnel.
//!
//! Invariant: `list` equals `Ledger::merged_volumes(base, index)` of the ledger it follows (the
//! inventory's volumes in order, those whose record is deleted left out and those with a live
//! record replaced by it, then the live records of volumes the inventory lacks, in key order).
//! The order matters: plans are deterministic over it.
//!
//! The effective inventory starts from this list (`Core::rebuild`). Copied
//! there after every change, the copy cost one reference count increment per volume, and the
//! old copy's drop one decrement, each a cache miss: a commit's cost grew with every volume
//! the cluster has (at 4,000 volumes, 19% of an agent's commit in a loop of commits). So the
//! list records its edits since it was last copied ([`Merged::copy`]), and [`Merged::bring`]
//! makes the same edits to that copy: a change costs what it changed.

use std::collections::BTreeSet;
use std::sync::Arc;

use fedvol_common::model::{Inventory, PersistentVolume};

use super::ledger::{InventoryIndex, Ledger};

/// The merged volume list, and what is needed to edit it in place.
#[derive(Debug, Clone)]
pub struct Merged {
    /// The merged volumes.
    list: Vec<Arc<PersistentVolume>>,
    /// Positions in the inventory's volumes whose record is deleted (left out of `list`).
    gone: BTreeSet<usize>,
    /// Keys ([`super::store::volume_key`]) of the live records of volumes the inventory
    /// lacks, in order: `list`'s tail, after the inventory's volumes still there.
    tail: Vec<String>,
    /// The ledger's volumes generation `list` was made or last edited at.
    generation: u64,
    /// The edits made to `list` since it was last copied or brought, in order; `None` when no
    /// copy is to be brought (none made, or too many edits to be worth replaying).
    edits: Option<Vec<Edit>>,
    /// The length `list` had when it was last copied or brought.
    copied_len: usize,
}

/// One edit of the merged list, at positions of the list as it was then.
#[derive(Debug, Clone)]
enum Edit {
    /// The volume at this position was replaced.
    Set(usize, Arc<PersistentVolume>),
    /// A volume was inserted at this position.
    Insert(usize, Arc<PersistentVolume>),
    /// The volume at this position was removed.
    Remove(usize),
}

impl Merged {
    /// The merged list of `ledger` over `base` (`index` is [`InventoryIndex::new`] of `base`).
    pub fn new(ledger: &Ledger, base: &Inventory, index: &InventoryIndex) -> Merged {
        let (list, gone, tail) = ledger.merged_parts(base, index);
        Merged {
            list,
            gone,
            tail,
            generation: ledger.volumes_generation(),
            edits: None,
            copied_len: 0,
        }
    }

    /// A copy of the list; the edits made from now on are recorded, for [`Merged::bring`] to
    /// make to it.
    pub fn copy(&mut self) -> Vec<Arc<PersistentVolume>> {
        self.edits = Some(Vec::new());
        self.copied_len = self.list.len();
        self.list.clone()
    }

    /// Brings `volumes` up to the list: its first entries must be the last copy
    /// ([`Merged::copy`]) as this list brought it last (anything after them is cut), and
    /// they are edited as the list was since. Each volume it keeps is the list's own (the same
    /// `Arc`). Returns false, leaving `volumes` as it was, when there is no such copy to bring
    /// (none made, or more edits since than replaying is worth): then copy again.
    pub fn bring(&mut self, volumes: &mut Vec<Arc<PersistentVolume>>) -> bool {
        let Some(edits) = self.edits.as_mut() else {
            return false;
        };
        if volumes.len() < self.copied_len {
            return false;
        }
        volumes.truncate(self.copied_len);
        for e in edits.drain(..) {
            match e {
                Edit::Set(i, v) => volumes[i] = v,
                Edit::Insert(i, v) => volumes.insert(i, v),
                Edit::Remove(i) => {
                    volumes.remove(i);
                }
            }
        }
        self.copied_len = self.list.len();
        debug_assert!(
            volumes.len() == self.list.len() && volumes.iter().zip(&self.list).all(|(a, b)| Arc::ptr_eq(a, b))
        );
        true
    }

    /// Records `e`, made to the list, for [`Merged::bring`]; past a quarter of the list's
    /// length in edits, a copy is cheaper than replaying them, and none are kept.
    fn record(&mut self, e: Edit) {
        if let Some(edits) = self.edits.as_mut() {
            if edits.len() > 64 + self.list.len() / 4 {
                self.edits = None;
            } else {
                edits.push(e);
            }
        }
    }

    /// The merged volumes.
    pub fn list(&self) -> &Vec<Arc<PersistentVolume>> {
        &self.list
    }

    /// Where in the list the live records of volumes the inventory `base` lacks lie: after the
    /// inventory's volumes still there, to the end, sorted by record key (provisioner, U+001F,
    /// name), each once: the run a plan's volume lookup may search by halves
    /// (`fedvol_common::funnel::Prepared::refreshed_sorted`).
    pub fn sorted_run(&self, base: &Inventory) -> std::ops::Range<usize> {
        base.volumes.len() - self.gone.len()..self.list.len()
    }

    /// The ledger's volumes generation this list follows.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Brings the list up to `ledger` after the records of `keys` were put or removed (and
    /// nothing else changed since the list was last made or edited).
    pub fn follow<'a>(
        &mut self,
        keys: impl IntoIterator<Item = &'a str>,
        ledger: &Ledger,
        base: &Inventory,
        index: &InventoryIndex,
    ) {
        for key in keys {
            self.one(key, ledger, base, index);
        }
        self.generation = ledger.volumes_generation();
    }

    /// Edits the list for the record of `key` as `ledger` now has it.
    fn one(&mut self, key: &str, ledger: &Ledger, base: &Inventory, index: &InventoryIndex) {
        let record = ledger.volumes().get(key);
        let at_base = record
            .and_then(|mv| index.volume(mv.pv.provisioner.as_deref(), &mv.pv.name))
            .or_else(|| base_position(key, index));
        match at_base {
            Some(i) => {
                // What the list should hold for the inventory's volume i: the live record,
                // nothing (deleted), or the inventory's own volume (no record).
                let want = match record {
                    Some(mv) if mv.deleted => None,
                    Some(mv) => Some(mv.pv.clone()),
                    None => base.volumes.get(i).cloned(),
                };
                let was_there = !self.gone.contains(&i);
                let pos = i - self.gone.range(..i).count();
                match (was_there, want) {
                    (true, Some(v)) => self.set(pos, v),
                    (true, None) => {
                        self.remove(pos);
                        self.gone.insert(i);
                    }
                    (false, Some(v)) => {
                        self.gone.remove(&i);
                        self.insert(pos, v);
                    }
                    (false, None) => {}
                }
            }
            None => {
                let want = record.filter(|mv| !mv.deleted).map(|mv| mv.pv.clone());
                let start = self.sorted_run(base).start;
                match (self.tail.binary_search_by(|k| k.as_str().cmp(key)), want) {
                    (Ok(j), Some(v)) => self.set(start + j, v),
                    (Ok(j), None) => {
                        self.tail.remove(j);
                        self.remove(start + j);
                    }
                    (Err(j), Some(v)) => {
                        self.tail.insert(j, key.to_string());
                        self.insert(start + j, v);
                    }
                    (Err(_), None) => {}
                }
            }
        }
    }

    fn set(&mut self, at: usize, v: Arc<PersistentVolume>) {
        self.record(Edit::Set(at, v.clone()));
        self.list[at] = v;
    }

    fn insert(&mut self, at: usize, v: Arc<PersistentVolume>) {
        self.record(Edit::Insert(at, v.clone()));
        self.list.insert(at, v);
    }

    fn remove(&mut self, at: usize) {
        self.record(Edit::Remove(at));
        self.list.remove(at);
    }
}

/// The position in `base` of the volume whose record key is `key`, for a record that is gone
/// (removed from the ledger): the key is the provisioner (empty for none), U+001F, the name
/// ([`super::store::volume_key`]).
fn base_position(key: &str, index: &InventoryIndex) -> Option<usize> {
    let (p, n) = key.split_once('\u{1f}')?;
    index.volume((!p.is_empty()).then_some(p), n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::records::ManagedVolume;
    use crate::state::store::volume_key;
    use fedvol_common::funnel::VolumeId;
    use fedvol_common::model::VolumePhase;
    use fedvol_common::synth::{SynthSizes, cluster};

    fn names(v: &[Arc<PersistentVolume>]) -> Vec<String> {
        v.iter()
            .map(|v| format!("{:?}/{}/{:?}", v.provisioner, v.name, v.phase))
            .collect()
    }

    /// Records put (live or deleted) and removed at random, on volumes of the inventory and
    /// new ones: after each change the edited list is the list built afresh, in the same order.
    #[test]
    fn an_edited_list_is_the_list_built_afresh() {
        let base = cluster(
            "c",
            SynthSizes {
                hosts: 1,
                provisioners: 3,
                volumes: 40,
            },
        );
        let index = InventoryIndex::new(&base);
        let mut ledger = Ledger::default();
        let mut merged = Merged::new(&ledger, &base, &index);
        // A copy brought up to the list now and then, as the effective inventory is: with
        // what holds add after it, and several changes apart.
        let mut copy = merged.copy();
        let (mut brought, mut copied) = (0, 0);
        let mut next = crate::state::tests::draws(0x9e37_79b9_7f4a_7c15);
        for step in 0..3000 {
            // A volume of the inventory, or one of 60 new names on its provisioners.
            let pick = next(100) as usize;
            let pv: PersistentVolume = match base.volumes.get(pick) {
                Some(v) if pick < 40 => (**v).clone(),
                _ => {
                    let mut v = (*base.volumes[pick % 40]).clone();
                    v.name = format!("new-{}", pick % 60);
                    v
                }
            };
            let key = volume_key(&VolumeId {
                provisioner: pv.provisioner.clone(),
                name: pv.name.clone(),
            });
            match next(3) {
                2 => {
                    ledger.remove_volume(&key);
                }
                what => {
                    let mut pv = pv;
                    pv.phase = if next(2) == 0 {
                        VolumePhase::Bound
                    } else {
                        VolumePhase::Released
                    };
                    ledger.put_volume(ManagedVolume {
                        pv: Arc::new(pv),
                        source: None,
                        provisioned: true,
                        deleted: what == 1,
                        events: Vec::new(),
                    });
                }
            }
            merged.follow([key.as_str()], &ledger, &base, &index);
            let fresh = ledger.merged_volumes(&base, &index);
            assert_eq!(names(merged.list()), names(&fresh), "step {step}");
            assert!(
                merged.list().iter().zip(&fresh).all(|(a, b)| Arc::ptr_eq(a, b)),
                "step {step}: the same volumes"
            );
            assert_eq!(merged.generation(), ledger.volumes_generation());
            if next(4) == 0 {
                continue;
            }
            for _ in 0..next(3) {
                copy.push(Arc::new((*base.volumes[0]).clone()));
            }
            if merged.bring(&mut copy) {
                brought += 1;
            } else {
                copy = merged.copy();
                copied += 1;
            }
            assert!(
                copy.len() == merged.list().len() && copy.iter().zip(merged.list()).all(|(a, b)| Arc::ptr_eq(a, b)),
                "step {step}: the copy brought up to the list"
            );
        }
        assert!(brought > 1000, "brought {brought} times, copied {copied}");
        // Edits past a quarter of the list are not kept: the copy is made again.
        for i in 0..200 {
            let mut pv = (*base.volumes[0]).clone();
            pv.name = format!("many-{i:03}");
            let key = volume_key(&VolumeId {
                provisioner: pv.provisioner.clone(),
                name: pv.name.clone(),
            });
            ledger.put_volume(ManagedVolume {
                pv: Arc::new(pv),
                source: None,
                provisioned: true,
                deleted: false,
                events: Vec::new(),
            });
            merged.follow([key.as_str()], &ledger, &base, &index);
        }
        assert!(!merged.bring(&mut copy), "too many edits to replay");
        assert_eq!(names(&merged.copy()), names(&ledger.merged_volumes(&base, &index)));
    }
}
