//! What `verify` reports about a table whose record count is damaged, the same in every front
//! end.
//!
//! Table entries are never blank (all zero) once written: every record is at least 1 byte, so
//! its entry has a length. A table that ends in a run of blank entries therefore has a header
//! that counts records nobody wrote. Verify reports that run as one problem (its first record,
//! with the others counted but not listed) instead of decoding it record by record, since a
//! damaged count can claim 2^24 records.
//!
//! The run is found by looking at the table backwards, [`BLANK_SCAN`] entries at a time
//! ([`scan_window`], [`written_end`]): the front end fetches each window (a map, a ranged read, a
//! cached page) and hands the entries here, so native and wasm report the same run.

use std::ops::Range;

use crate::format::RecordLoc;

/// Table entries looked at per step of the backward scan (64 KiB of table).
pub const BLANK_SCAN: u64 = 4096;

/// The window of entries to look at next, when every entry from `from` to the end is blank
/// (start with `from` = the record count); `None` at the start of the table.
pub fn scan_window(from: u64) -> Option<Range<u64>> {
    (from > 0).then(|| from.saturating_sub(BLANK_SCAN)..from)
}

/// Given the entries of the window starting at `start` in order, where the blank run starts if
/// this window holds a written entry (one past the last one), or `None` when the whole window is
/// blank and the scan goes on before `start`.
pub fn written_end(start: u64, entries: &[RecordLoc]) -> Option<u64> {
    entries.iter().rposition(|e| !e.is_blank()).map(|k| start + k as u64 + 1)
}

/// The problem verify reports at record `blank_from`, when entries `blank_from..total` of the
/// table in `meta` are blank.
pub fn blank_tail_problem(meta: &str, blank_from: u64, total: u64) -> String {
    format!(
        "{meta}: table entries {blank_from}..{total} are blank (never written), yet the header counts \
         {total} records: the header's record count is damaged"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(len: u32) -> RecordLoc {
        RecordLoc { logic_length: len, phys_length: len, ..RecordLoc::default() }
    }

    /// The scan as a front end runs it, over an in-memory table.
    fn scan(table: &[RecordLoc]) -> u64 {
        let mut from = table.len() as u64;
        while let Some(w) = scan_window(from) {
            match written_end(w.start, &table[w.start as usize..w.end as usize]) {
                Some(end) => return end,
                None => from = w.start,
            }
        }
        0
    }

    #[test]
    fn the_blank_run_is_found_across_windows() {
        let n = 3 * BLANK_SCAN as usize + 17;
        for written in [0, 1, 5, BLANK_SCAN as usize, BLANK_SCAN as usize + 1, n - 1, n] {
            let table: Vec<RecordLoc> =
                (0..n).map(|i| if i < written { entry(3) } else { RecordLoc::default() }).collect();
            assert_eq!(scan(&table), written as u64, "{written}");
        }
        assert_eq!(scan(&[]), 0);
        assert_eq!(scan_window(10), Some(0..10));
    }

    #[test]
    fn a_blank_entry_inside_the_written_records_is_not_the_run() {
        let mut table = vec![entry(1); 10];
        table[4] = RecordLoc::default();
        assert_eq!(scan(&table), 10);
        assert!(blank_tail_problem("s/meta.zr", 3, 9).starts_with("s/meta.zr: table entries 3..9 are blank"));
    }
}
