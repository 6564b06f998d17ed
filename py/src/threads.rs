//! Where a binding call's rayon work runs: this process's pool (`loaderx_native::process`, the
//! one place that knows `fork()`; a forked child gets a pool of its own there).

pub(crate) use loaderx_native::process::run;
