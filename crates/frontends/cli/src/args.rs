//! Argument values clap does not parse by itself (sizes are in `size.rs`). Pure functions of
//! the text, so that the fuzz target `cli_args` (fuzz/) runs them as the command does.

/// An octal permission mode such as 0640.
pub fn parse_mode(text: &str) -> Result<u32, String> {
    u32::from_str_radix(text.trim_start_matches("0o"), 8)
        .ok()
        .filter(|m| *m <= 0o777)
        .ok_or_else(|| {
            format!("invalid mode {text:?}: expected octal permission bits such as 0640")
        })
}
