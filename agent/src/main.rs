fn main() {
    eprintln!("fedvol-agent: not built yet (issue 3)");
    std::process::exit(1);
}
