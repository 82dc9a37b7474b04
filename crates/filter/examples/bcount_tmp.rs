use bloomkv_filter::{BloomPolicy, FilterPolicy, KeyHash, RibbonPolicy};
fn main() {
    let args: Vec<String> = std::env::args().collect();
    let n: usize = args[2].parse().unwrap();
    let policy: Box<dyn FilterPolicy> = match args[1].as_str() {
        "bloom" => Box::new(BloomPolicy::cache_local(10.0).unwrap()),
        "v3" => Box::new(
            RibbonPolicy::new(10.0)
                .unwrap()
                .with_format_version(3)
                .unwrap(),
        ),
        "none" => Box::new(BloomPolicy::cache_local(10.0).unwrap()),
        _ => Box::new(RibbonPolicy::new(10.0).unwrap()),
    };
    let mut s = 1u64;
    let mut next = || {
        s = s
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        s ^ (s >> 29)
    };
    let keys: Vec<KeyHash> = (0..n)
        .map(|_| KeyHash::from_halves(next(), next()))
        .collect();
    if args[1] == "none" {
        println!("{}", keys.len());
        return;
    }
    let mut b = policy.new_builder();
    for &k in &keys {
        b.add_hash(k);
    }
    println!("{}", b.finish().len());
}
