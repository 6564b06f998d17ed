//! The delete journal: what makes `delete` crash-atomic.
//!
//! A delete changes several table entries and then the length. Those writes cannot be made
//! atomic together, so before touching the table the writer stores the delete's *outcome* in a
//! small side file, `delete.journal`: the length before, the length after and the final value
//! of every live entry that changes. Replaying a journal is idempotent (it only writes final
//! values), so a delete interrupted at any point is finished by replaying its journal, and the
//! store moves from the old state to the new one with nothing in between ever surviving.
//!
//! Invariants:
//! * [`DeleteJournal::plan`] yields entries only for indices below `new_length`, each at most
//!   once, in ascending order.
//! * [`DeleteJournal::parse`] accepts exactly the bytes [`DeleteJournal::to_bytes`] produces
//!   (magic, version, counts, entries and a SHA-256 prefix over all of them); anything else is a
//!   [`JournalError`], never a panic.
//! * A journal applies only to a table whose length is `old_length` (nothing replayed yet) or
//!   `new_length` (replayed, perhaps partly: the length is published last); see
//!   [`DeleteJournal::applies_to`].
//!
//! The file is ours alone: the format of `meta.zr` and the chunk files is unchanged, and readers
//! that do not know the journal (the reference, the wasm reader) simply never see one unless a
//! writer died mid-delete.

use std::collections::BTreeMap;

use sha2::{Digest, Sha256};

use crate::error::{Classify, ErrorKind, Location, StoreFile};
use crate::format::{RecordLoc, ENTRY_SIZE};
use crate::plan::{delete_swaps, PlanError};

/// File name of the journal inside a store directory (named in [`crate::names`]).
pub use crate::names::JOURNAL_FILE;

const MAGIC: [u8; 4] = *b"LXDJ";
const VERSION: u16 = 1;
const HEAD_LEN: usize = 4 + 2 + 2 + 4 + 4 + 4;
const ITEM_LEN: usize = 4 + ENTRY_SIZE as usize;
const SUM_LEN: usize = 8;

/// A journal that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("delete.journal is damaged: {0}")]
pub struct JournalError(&'static str);

/// The outcome of one delete: the table after it, as far as it differs from the table before.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeleteJournal {
    /// The length before the delete.
    pub old_length: u32,
    /// The length after the delete.
    pub new_length: u32,
    /// `(index, final entry)` for every live index whose entry changes, ascending.
    pub entries: Vec<(u32, RecordLoc)>,
}

impl DeleteJournal {
    /// Plans deleting `indices` from a table of `length` entries, read through `entry`. Returns
    /// `None` when nothing is deleted (`indices` empty).
    pub fn plan(
        length: u64,
        indices: &[u64],
        mut entry: impl FnMut(u64) -> Option<RecordLoc>,
    ) -> Result<Option<DeleteJournal>, JournalPlanError> {
        let swaps = delete_swaps(length, indices)?;
        if swaps.is_empty() {
            return Ok(None);
        }
        let new_length = length - swaps.len() as u64;
        let mut changed: BTreeMap<u64, RecordLoc> = BTreeMap::new();
        for (hole, last) in swaps {
            let moved = match changed.get(&last) {
                Some(loc) => *loc,
                None => entry(last).ok_or(JournalPlanError::Unreadable { index: last })?,
            };
            changed.insert(hole, moved);
        }
        let entries = changed
            .into_iter()
            .filter(|&(index, _)| index < new_length)
            .map(|(index, loc)| (index as u32, loc))
            .collect();
        // Both lengths fit in u32: `length` is a published table length (at most 2^24).
        Ok(Some(DeleteJournal { old_length: length as u32, new_length: new_length as u32, entries }))
    }

    /// True when this journal can be replayed onto a table of `length` entries.
    pub fn applies_to(&self, length: u32) -> bool {
        length == self.old_length || length == self.new_length
    }

    /// The journal's file contents.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(HEAD_LEN + self.entries.len() * ITEM_LEN + SUM_LEN);
        out.extend_from_slice(&MAGIC);
        out.extend_from_slice(&VERSION.to_le_bytes());
        out.extend_from_slice(&0u16.to_le_bytes());
        out.extend_from_slice(&self.old_length.to_le_bytes());
        out.extend_from_slice(&self.new_length.to_le_bytes());
        out.extend_from_slice(&(self.entries.len() as u32).to_le_bytes());
        for (index, loc) in &self.entries {
            out.extend_from_slice(&index.to_le_bytes());
            out.extend_from_slice(&loc.to_bytes());
        }
        let sum = checksum(&out);
        out.extend_from_slice(&sum);
        out
    }

    /// Parses journal file contents.
    pub fn parse(bytes: &[u8]) -> Result<DeleteJournal, JournalError> {
        let (body, sum) = bytes
            .split_at_checked(bytes.len().saturating_sub(SUM_LEN))
            .filter(|(body, _)| body.len() >= HEAD_LEN)
            .ok_or(JournalError("too short"))?;
        if checksum(body) != sum {
            return Err(JournalError("checksum mismatch"));
        }
        let word = |at: usize| u32::from_le_bytes([body[at], body[at + 1], body[at + 2], body[at + 3]]);
        if body[..4] != MAGIC || u16::from_le_bytes([body[4], body[5]]) != VERSION {
            return Err(JournalError("unknown magic or version"));
        }
        let (old_length, new_length, count) = (word(8), word(12), word(16) as usize);
        if new_length >= old_length {
            return Err(JournalError("the delete does not shrink the table"));
        }
        if body.len() != count.checked_mul(ITEM_LEN).and_then(|n| n.checked_add(HEAD_LEN)).unwrap_or(0) {
            return Err(JournalError("entry count does not match the size"));
        }
        let mut entries = Vec::with_capacity(count);
        for item in body[HEAD_LEN..].chunks_exact(ITEM_LEN) {
            let index = u32::from_le_bytes([item[0], item[1], item[2], item[3]]);
            let loc = RecordLoc::read(&item[4..]).ok_or(JournalError("short entry"))?;
            if index >= new_length || entries.last().is_some_and(|&(prev, _)| prev >= index) {
                return Err(JournalError("entry indices out of order or out of range"));
            }
            entries.push((index, loc));
        }
        Ok(DeleteJournal { old_length, new_length, entries })
    }
}

/// Why a delete could not be planned.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JournalPlanError {
    #[error(transparent)]
    Plan(#[from] PlanError),
    /// The table entry of a live record could not be read.
    #[error("table entry {index} cannot be read")]
    Unreadable { index: u64 },
}

impl Classify for JournalError {
    fn kind(&self) -> ErrorKind {
        ErrorKind::Corrupt
    }

    fn location(&self) -> Option<Location> {
        Some(Location::file(StoreFile::Journal))
    }
}

impl Classify for JournalPlanError {
    fn kind(&self) -> ErrorKind {
        match self {
            JournalPlanError::Plan(p) => p.kind(),
            JournalPlanError::Unreadable { .. } => ErrorKind::Corrupt,
        }
    }

    fn location(&self) -> Option<Location> {
        match self {
            JournalPlanError::Plan(p) => p.location(),
            JournalPlanError::Unreadable { index } => {
                Some(Location::at(StoreFile::Meta, crate::format::entry_offset(*index)))
            }
        }
    }
}

fn checksum(bytes: &[u8]) -> [u8; SUM_LEN] {
    let digest = Sha256::digest(bytes);
    let mut sum = [0u8; SUM_LEN];
    sum.copy_from_slice(&digest[..SUM_LEN]);
    sum
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn loc(k: u32) -> RecordLoc {
        RecordLoc { offset: k * 10, phys_length: 10, logic_length: 10, ..Default::default() }
    }

    /// Applies the swaps one at a time, as the reference does, for comparison.
    fn by_swaps(length: u64, indices: &[u64]) -> Vec<RecordLoc> {
        let mut table: Vec<RecordLoc> = (0..length as u32).map(loc).collect();
        let swaps = delete_swaps(length, indices).unwrap();
        for &(hole, last) in &swaps {
            table[hole as usize] = table[last as usize];
        }
        table.truncate(table.len() - swaps.len());
        table
    }

    proptest! {
        #[test]
        fn replaying_a_journal_equals_swapping(
            length in 1u64..40,
            picks in proptest::collection::vec(0u64..40, 0..20),
            replays in 1usize..3,
        ) {
            let indices: Vec<u64> = picks.into_iter().filter(|&i| i < length).collect();
            let planned = DeleteJournal::plan(length, &indices, |i| Some(loc(i as u32))).unwrap();
            let Some(journal) = planned else {
                prop_assert!(indices.is_empty());
                return Ok(());
            };
            let parsed = DeleteJournal::parse(&journal.to_bytes()).unwrap();
            prop_assert_eq!(&parsed, &journal);
            let mut table: Vec<RecordLoc> = (0..length as u32).map(loc).collect();
            for _ in 0..replays {
                prop_assert!(journal.applies_to(journal.old_length));
                for &(index, entry) in &journal.entries {
                    table[index as usize] = entry;
                }
            }
            table.truncate(journal.new_length as usize);
            prop_assert_eq!(table, by_swaps(length, &indices));
        }
    }

    #[test]
    fn damaged_journals_are_errors() {
        let journal = DeleteJournal::plan(10, &[1, 3, 9], |i| Some(loc(i as u32))).unwrap().unwrap();
        let bytes = journal.to_bytes();
        for cut in 0..bytes.len() {
            assert!(DeleteJournal::parse(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        for at in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[at] ^= 0x40;
            assert!(DeleteJournal::parse(&bad).is_err(), "flip at {at}");
        }
        assert!(!journal.applies_to(9) && journal.applies_to(10) && journal.applies_to(7));
    }

    #[test]
    fn planning_checks_indices_and_entries() {
        assert!(matches!(
            DeleteJournal::plan(3, &[3], |i| Some(loc(i as u32))),
            Err(JournalPlanError::Plan(PlanError::IndexOutOfRange { index: 3, length: 3 }))
        ));
        assert_eq!(DeleteJournal::plan(3, &[], |_| None), Ok(None));
        assert_eq!(DeleteJournal::plan(3, &[0], |_| None), Err(JournalPlanError::Unreadable { index: 2 }));
    }
}
