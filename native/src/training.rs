//! The converters' dictionary rule, in one place: which records a dictionary is trained on and
//! how big it may grow (both from `loaderx_core::codec`). The CLI's `convert` and Python's
//! converters call [`Store::train_dict_for`].

use loaderx_core::codec::{auto_dict_size, dict_training_set};
use loaderx_core::plan::record_ranges;

use crate::error::Result;
use crate::Store;

impl Store {
    /// Trains the store's dictionary on up to 8192 evenly spaced records of the batch packed in
    /// `src` (record `k` starts at `offsets[k]`), with at most `capacity` bytes, by default 1%
    /// of the sample bytes clamped to 8 KiB..=1 MiB. Returns the dictionary size.
    pub fn train_dict_for(&self, src: &[u8], offsets: &[u64], capacity: Option<usize>) -> Result<usize> {
        let ranges = record_ranges(src.len(), offsets)?;
        let records: Vec<&[u8]> = ranges.into_iter().map(|r| &src[r]).collect();
        let (samples, sizes) = dict_training_set(&records);
        let capacity = capacity.unwrap_or_else(|| auto_dict_size(samples.len() as u64));
        self.train_dict(&samples, &sizes, capacity)
    }
}
