//! The `bloomkv` command line.

fn main() {
    eprintln!("bloomkv: the benchmark is not built yet");
    std::process::exit(2);
}
