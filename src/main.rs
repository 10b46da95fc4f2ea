fn main() {
    println!("gkq {}", env!("CARGO_PKG_VERSION"));
}
