//! The `loaderx` binary: see [`loaderx_native::cli`].

fn main() -> std::process::ExitCode {
    std::process::ExitCode::from(loaderx_native::cli::run(std::env::args_os()))
}
