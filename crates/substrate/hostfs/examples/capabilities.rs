//! Print what the file system of a directory offers: `capabilities <dir>`.

use hostfs::{HostFs, RealHostFs};

fn main() {
    let Some(dir) = std::env::args().nth(1) else {
        eprintln!("usage: capabilities <dir>");
        std::process::exit(2);
    };
    match RealHostFs::open(&dir) {
        Ok(fs) => println!(
            "{dir}: {:?} (paths resolved by {:?})",
            fs.capabilities(),
            fs.resolver()
        ),
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    }
}
