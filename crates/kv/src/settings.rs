//! The settings file (`SETTINGS`): how a store's tables and levels are made, kept in
//! its directory so that the tools that open it later (the command line, `repair`,
//! `verify`) open it as it was written, not with the defaults (RocksDB's OPTIONS file).
//!
//! ```text
//!  # bloomkv settings: how this store's tables and levels are made
//!  format=1
//!  filter=bloomkv.BloomFilter.cache-local      the policy's name, as tables record it
//!  bits_per_key=10                             ("" = no filter)
//!  …                                           one `name=value` line per setting
//!  prefix_extractor=bloomkv.FixedPrefix.4      ("" = none)
//!  range_filter=16,64                          bits_per_key,max_range_len ("" = none)
//!  crc32=5d1f0a27                              CRC-32 of every byte before this line
//! ```
//!
//! Text, so a person can read it (`cat SETTINGS`); checksummed, so damage is told from
//! a setting. docs/FORMAT.md gives the grammar. Only what shapes the data is recorded:
//! the filter (kind by policy name, bits, allocation, per-level choices), the prefix
//! extractor and the range filter, block layout and compression, memtable and level
//! sizing. What belongs to one process (the file system, caches, `sync_writes`, the
//! recovery mode, `read_only`) is not.
//!
//! Objects are recorded by name and never guessed back: a filter policy or prefix
//! extractor is restored only if it is built in or the reader was given one of that
//! name ([`Options::filter`], [`Options::extra_filter_policies`],
//! [`Options::prefix_extractor`]); otherwise it is reported as unresolved and the
//! reader's own setting stays.
//!
//! The rule at [`Db::open`](crate::Db::open): the caller's `Options` win. New tables
//! are built with them, and a writable open rewrites the file when it differs, so the
//! file always says how the newest tables were made (older tables describe themselves:
//! each records its filter policy, extractor and block format). A read-only open never
//! writes it. The file is written as the manifest is: `SETTINGS.tmp`, fsync, rename,
//! fsync of the directory, so a crash leaves the old file or the new one, whole.

use std::fmt;
use std::io;
use std::path::Path;
use std::sync::Arc;

use bloomkv_filter::{CACHE_LOCAL_POLICY_NAME, RIBBON_POLICY_NAME, STANDARD_POLICY_NAME};
use serde::Serialize;

use crate::error::{Error, Result};
use crate::filename;
use crate::fs::FileSystem;
use crate::options::{FilterAllocation, FilterKind, Options};
use crate::prefix::{FixedPrefix, PrefixExtractor};
use crate::sstable::{Compression, RangeFilterOptions};

/// The settings file format this build writes (the `format=` line).
pub const SETTINGS_FORMAT: u32 = 1;

/// The largest settings file a reader accepts; checked before it is read.
const MAX_SETTINGS_LEN: u64 = 64 << 10;

/// The first line: a comment for whoever opens the file.
const HEADER: &str = "# bloomkv settings: how this store's tables and levels are made\n";

/// The prefix of the last line.
const CRC_PREFIX: &str = "crc32=";

/// A store's recorded settings: `name=value` pairs, in the order written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Settings {
    entries: Vec<(String, String)>,
}

/// What a reader found in a store's directory.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub enum SettingsState {
    /// A valid settings file.
    Recorded,
    /// No settings file (a new store, or one written before stores recorded them).
    #[default]
    Missing,
    /// A settings file that fails its checksum or grammar; the reason.
    Damaged(String),
}

impl fmt::Display for SettingsState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SettingsState::Recorded => f.write_str("recorded"),
            SettingsState::Missing => f.write_str("missing (the options given are used)"),
            SettingsState::Damaged(why) => {
                write!(f, "damaged, not used (the options given are used): {why}")
            }
        }
    }
}

/// A store's settings applied over a caller's options (see [`load_options`]).
#[derive(Debug, Clone)]
pub struct LoadedOptions {
    /// The options to open the store with: the recorded settings over the base.
    pub options: Options,
    /// What the directory held.
    pub state: SettingsState,
    /// Filter policies and prefix extractors the file names that this program does
    /// not have; for each, the base's setting stayed. Reads stay correct (a table
    /// whose policy is unknown is read without its filter), but tables built now
    /// would get the base's setting.
    pub unresolved: Vec<String>,
    /// Settings that could not be applied: names this build does not know, values it
    /// cannot read (a newer build's), a combination the options refuse.
    pub ignored: Vec<String>,
}

/// What a [`Db::open`](crate::Db::open) found and did with the settings file.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct SettingsReport {
    /// What the directory held.
    pub found: SettingsState,
    /// The file was recorded but said something other than the options given.
    pub differed: bool,
    /// This open wrote the file (it was missing, damaged or different).
    pub written: bool,
}

impl fmt::Display for SettingsReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "settings {}", self.found)?;
        if self.differed {
            f.write_str(", differing from the options given")?;
        }
        if self.written {
            f.write_str("; rewritten from the options given")?;
        }
        Ok(())
    }
}

fn on_off(b: bool) -> String {
    b.to_string()
}

impl Settings {
    /// The settings `options` make tables and levels with.
    pub fn of(options: &Options) -> Settings {
        let filter = match &options.filter {
            FilterKind::None => String::new(),
            FilterKind::CacheLocalBloom => CACHE_LOCAL_POLICY_NAME.to_string(),
            FilterKind::StandardBloom => STANDARD_POLICY_NAME.to_string(),
            FilterKind::Ribbon => RIBBON_POLICY_NAME.to_string(),
            FilterKind::Custom(policy) => policy.name().to_string(),
        };
        let range = match &options.range_filter {
            None => String::new(),
            Some(r) => format!("{},{}", r.bits_per_key, r.max_range_len),
        };
        let o = options;
        let entries = [
            ("format", SETTINGS_FORMAT.to_string()),
            ("filter", filter),
            ("bits_per_key", o.bits_per_key.to_string()),
            ("filter_allocation", format!("{:?}", o.filter_allocation)),
            (
                "optimize_filters_for_hits",
                on_off(o.optimize_filters_for_hits),
            ),
            ("bloom_before_level", o.bloom_before_level.to_string()),
            (
                "prefix_extractor",
                o.prefix_extractor
                    .as_ref()
                    .map_or(String::new(), |p| p.name().to_string()),
            ),
            ("range_filter", range),
            ("compression", o.compression.to_string()),
            (
                "bottommost_compression",
                o.bottommost_compression
                    .map_or(String::new(), |c| c.to_string()),
            ),
            ("block_size", o.block_size.to_string()),
            ("block_align", on_off(o.block_align)),
            ("restart_interval", o.restart_interval.to_string()),
            ("memtable_size", o.memtable_size.to_string()),
            (
                "max_immutable_memtables",
                o.max_immutable_memtables.to_string(),
            ),
            ("l0_compaction_trigger", o.l0_compaction_trigger.to_string()),
            (
                "level0_slowdown_writes_trigger",
                o.level0_slowdown_writes_trigger.to_string(),
            ),
            (
                "level0_stop_writes_trigger",
                o.level0_stop_writes_trigger.to_string(),
            ),
            ("level1_max_bytes", o.level1_max_bytes.to_string()),
            ("level_size_multiplier", o.level_size_multiplier.to_string()),
            ("dynamic_level_bytes", on_off(o.dynamic_level_bytes)),
            ("target_file_size", o.target_file_size.to_string()),
        ];
        Settings {
            entries: entries
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect(),
        }
    }

    /// The recorded `name=value` pairs, in file order.
    pub fn entries(&self) -> &[(String, String)] {
        &self.entries
    }

    /// The value recorded for `name`.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.entries
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// The file's bytes (see the module docs and docs/FORMAT.md).
    pub fn encode(&self) -> Vec<u8> {
        let mut text = String::from(HEADER);
        for (k, v) in &self.entries {
            text.push_str(k);
            text.push('=');
            text.push_str(&escape(v));
            text.push('\n');
        }
        let crc = crc32fast::hash(text.as_bytes());
        text.push_str(&format!("{CRC_PREFIX}{crc:08x}\n"));
        text.into_bytes()
    }

    /// Parses a settings file, checking its checksum before anything else. The error
    /// says what is wrong; `path` only names the file in it.
    pub fn decode(bytes: &[u8], path: &Path) -> Result<Settings> {
        let bad = |why: String| Err(Error::corruption(path, why));
        if bytes.len() as u64 > MAX_SETTINGS_LEN {
            return bad(format!(
                "{} bytes, more than a settings file holds",
                bytes.len()
            ));
        }
        // The last line is `crc32=xxxxxxxx\n`, 15 bytes; it covers all before it.
        let trailer = CRC_PREFIX.len() + 9;
        if bytes.len() < trailer || bytes[bytes.len() - 1] != b'\n' {
            return bad("truncated: no checksum line at the end".into());
        }
        let (body, last) = bytes.split_at(bytes.len() - trailer);
        let Some(hex) = last
            .strip_prefix(CRC_PREFIX.as_bytes())
            .and_then(|h| std::str::from_utf8(&h[..8]).ok())
            .filter(|h| h.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')))
            .and_then(|h| u32::from_str_radix(h, 16).ok())
        else {
            return bad("truncated: no checksum line at the end".into());
        };
        let actual = crc32fast::hash(body);
        if actual != hex {
            return bad(format!(
                "checksum mismatch: recorded {hex:08x}, computed {actual:08x}"
            ));
        }
        let Ok(text) = std::str::from_utf8(body) else {
            return bad("not UTF-8".into());
        };
        if !body.is_empty() && !text.ends_with('\n') {
            return bad("the line before the checksum is not ended".into());
        }
        let mut entries: Vec<(String, String)> = Vec::new();
        for (no, line) in text.lines().enumerate() {
            if line.starts_with('#') {
                continue;
            }
            let Some((name, value)) = line.split_once('=') else {
                return bad(format!("line {}: not name=value", no + 1));
            };
            if name.is_empty() || entries.iter().any(|(k, _)| k == name) {
                return bad(format!("line {}: empty or repeated name {name:?}", no + 1));
            }
            let Some(value) = unescape(value) else {
                return bad(format!("line {}: a bad escape in the value", no + 1));
            };
            entries.push((name.to_string(), value));
        }
        let settings = Settings { entries };
        match settings.get("format").map(str::parse::<u32>) {
            Some(Ok(v)) if v >= 1 => Ok(settings),
            _ => bad("no format=N line".into()),
        }
    }

    /// Applies these settings over `base`: what `base` holds of the objects named here
    /// (policies, extractors) is used for them; names it does not hold are reported in
    /// `unresolved` and leave `base`'s setting.
    pub fn apply(&self, base: Options) -> LoadedOptions {
        let mut o = base.clone();
        let mut unresolved = Vec::new();
        let mut ignored = Vec::new();
        for (name, value) in &self.entries {
            let v = value.as_str();
            let applied = match name.as_str() {
                "format" => Ok(()),
                "filter" => {
                    match resolve_filter(&base, v) {
                        Some(kind) => o.filter = kind,
                        None => unresolved.push(format!(
                            "filter policy {v:?} (new tables get {:?}; register the policy \
                             with FilterKind::Custom or extra_filter_policies)",
                            base.filter
                        )),
                    }
                    Ok(())
                }
                "prefix_extractor" => {
                    match resolve_extractor(&base, v) {
                        Some(x) => o.prefix_extractor = x,
                        None => unresolved.push(format!(
                            "prefix extractor {v:?} (new tables get {}; pass it as \
                             prefix_extractor)",
                            base.prefix_extractor
                                .as_ref()
                                .map_or("none".to_string(), |p| format!("{:?}", p.name()))
                        )),
                    }
                    Ok(())
                }
                "bits_per_key" => parse(v).map(|x| o.bits_per_key = x),
                "filter_allocation" => match v {
                    "Uniform" => set(&mut o.filter_allocation, FilterAllocation::Uniform),
                    "Monkey" => set(&mut o.filter_allocation, FilterAllocation::Monkey),
                    "Adaptive" => set(&mut o.filter_allocation, FilterAllocation::Adaptive),
                    _ => Err(()),
                },
                "optimize_filters_for_hits" => parse(v).map(|x| o.optimize_filters_for_hits = x),
                "bloom_before_level" => parse(v).map(|x| o.bloom_before_level = x),
                "range_filter" => parse_range(v).map(|x| o.range_filter = x),
                "compression" => compression(v).map(|c| o.compression = c),
                "bottommost_compression" => match v {
                    "" => set(&mut o.bottommost_compression, None),
                    _ => compression(v).map(|c| o.bottommost_compression = Some(c)),
                },
                "block_size" => parse(v).map(|x| o.block_size = x),
                "block_align" => parse(v).map(|x| o.block_align = x),
                "restart_interval" => parse(v).map(|x| o.restart_interval = x),
                "memtable_size" => parse(v).map(|x| o.memtable_size = x),
                "max_immutable_memtables" => parse(v).map(|x| o.max_immutable_memtables = x),
                "l0_compaction_trigger" => parse(v).map(|x| o.l0_compaction_trigger = x),
                "level0_slowdown_writes_trigger" => {
                    parse(v).map(|x| o.level0_slowdown_writes_trigger = x)
                }
                "level0_stop_writes_trigger" => parse(v).map(|x| o.level0_stop_writes_trigger = x),
                "level1_max_bytes" => parse(v).map(|x| o.level1_max_bytes = x),
                "level_size_multiplier" => parse(v).map(|x| o.level_size_multiplier = x),
                "dynamic_level_bytes" => parse(v).map(|x| o.dynamic_level_bytes = x),
                "target_file_size" => parse(v).map(|x| o.target_file_size = x),
                _ => {
                    ignored.push(format!("{name}={v} (a setting this build does not know)"));
                    Ok(())
                }
            };
            if applied.is_err() {
                ignored.push(format!("{name}={v} (a value this build cannot read)"));
            }
        }
        if let Err(e) = o.validate() {
            ignored.push(format!("all of them: together they are refused ({e})"));
            o = base;
        }
        LoadedOptions {
            options: o,
            state: SettingsState::Recorded,
            unresolved,
            ignored,
        }
    }

    /// Reads the settings file in `dir`: `None` if there is none, `Corruption` if it
    /// does not decode. Its length is checked before it is read.
    pub fn read(fs: &dyn FileSystem, dir: &Path) -> Result<Option<Settings>> {
        let path = filename::settings_path(dir);
        let file = match fs.open_random(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        let len = file.len()?;
        if len > MAX_SETTINGS_LEN {
            return Err(Error::corruption(
                path,
                format!("{len} bytes, more than a settings file holds"),
            ));
        }
        let mut bytes = vec![0u8; len as usize];
        file.read_exact_at(&mut bytes, 0)?;
        Settings::decode(&bytes, &path).map(Some)
    }

    /// Writes the settings file durably: `SETTINGS.tmp`, fsync, rename over
    /// `SETTINGS`, fsync of the directory. A crash at any step leaves the old file or
    /// the new one; a failed step removes the temp file.
    pub fn write(&self, fs: &dyn FileSystem, dir: &Path) -> Result<()> {
        let (tmp, dest) = (
            filename::settings_tmp_path(dir),
            filename::settings_path(dir),
        );
        crate::fs::replace_durably(fs, &tmp, &dest, &self.encode())?;
        Ok(())
    }
}

impl fmt::Display for Settings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (k, v) in &self.entries {
            writeln!(f, "{k}={}", escape(v))?;
        }
        Ok(())
    }
}

/// The store in `path`'s recorded settings applied over `base` (see
/// [`Settings::apply`]): how a tool opens a store as it was written. A missing or
/// damaged file gives `base` unchanged, with [`LoadedOptions::state`] saying which.
/// Fails only when the file cannot be read at all (an I/O error). Reads through
/// `base.file_system`; writes nothing.
///
/// ```
/// use std::sync::Arc;
/// use bloomkv_kv::{load_options, Db, FixedPrefix, Options, SettingsState};
/// let dir = tempfile::tempdir()?;
/// let written = Options { prefix_extractor: Some(Arc::new(FixedPrefix::new(4))), ..Options::default() };
/// Db::open(dir.path(), written)?.close()?;
/// let loaded = load_options(dir.path(), Options::default())?;
/// assert_eq!(loaded.state, SettingsState::Recorded);
/// assert_eq!(loaded.options.prefix_extractor.unwrap().name(), "bloomkv.FixedPrefix.4");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn load_options(path: impl AsRef<Path>, base: Options) -> Result<LoadedOptions> {
    let fs = base.file_system.clone();
    let not_used = |base: Options, state: SettingsState| LoadedOptions {
        options: base,
        state,
        unresolved: Vec::new(),
        ignored: Vec::new(),
    };
    match Settings::read(fs.as_ref(), path.as_ref()) {
        Ok(Some(settings)) => Ok(settings.apply(base)),
        Ok(None) => Ok(not_used(base, SettingsState::Missing)),
        Err(Error::Corruption { reason, .. }) => Ok(not_used(base, SettingsState::Damaged(reason))),
        Err(e) => Err(e),
    }
}

/// What a [`Db::open`](crate::Db::open) does with the file: reads it, and in a
/// writable open writes `options`' settings when the file is missing, damaged or
/// different (the caller's options win). A read error other than "missing" fails a
/// writable open (the file could not be kept right) and is reported as damage by a
/// read-only one.
pub(crate) fn at_open(
    fs: &dyn FileSystem,
    dir: &Path,
    options: &Options,
) -> Result<SettingsReport> {
    let wanted = Settings::of(options);
    let (found, same) = match Settings::read(fs, dir) {
        Ok(Some(s)) => (SettingsState::Recorded, s == wanted),
        Ok(None) => (SettingsState::Missing, false),
        Err(Error::Corruption { reason, .. }) => (SettingsState::Damaged(reason), false),
        Err(e) if options.read_only => (SettingsState::Damaged(e.to_string()), false),
        Err(e) => return Err(e),
    };
    let differed = found == SettingsState::Recorded && !same;
    let written = !same && !options.read_only;
    if written {
        wanted.write(fs, dir)?;
    }
    Ok(SettingsReport {
        found,
        differed,
        written,
    })
}

/// A compression as `Settings::of` spells it (`None`, `Lz4`, `Zstd(3)`), and only so.
fn compression(v: &str) -> std::result::Result<Compression, ()> {
    match v.parse::<Compression>() {
        Ok(c) if c.to_string() == v => Ok(c),
        _ => Err(()),
    }
}

fn set<T>(slot: &mut T, value: T) -> std::result::Result<(), ()> {
    *slot = value;
    Ok(())
}

fn parse<T: std::str::FromStr>(v: &str) -> std::result::Result<T, ()> {
    v.parse().map_err(|_| ())
}

fn parse_range(v: &str) -> std::result::Result<Option<RangeFilterOptions>, ()> {
    if v.is_empty() {
        return Ok(None);
    }
    let (bits, len) = v.split_once(',').ok_or(())?;
    Ok(Some(RangeFilterOptions {
        bits_per_key: parse(bits)?,
        max_range_len: parse(len)?,
    }))
}

/// The filter kind a recorded policy name stands for, if this program has it.
fn resolve_filter(base: &Options, name: &str) -> Option<FilterKind> {
    match name {
        "" => return Some(FilterKind::None),
        CACHE_LOCAL_POLICY_NAME => return Some(FilterKind::CacheLocalBloom),
        STANDARD_POLICY_NAME => return Some(FilterKind::StandardBloom),
        RIBBON_POLICY_NAME => return Some(FilterKind::Ribbon),
        _ => {}
    }
    if let FilterKind::Custom(p) = &base.filter {
        if p.name() == name {
            return Some(base.filter.clone());
        }
    }
    base.extra_filter_policies
        .iter()
        .find(|p| p.name() == name)
        .map(|p| FilterKind::Custom(Arc::clone(p)))
}

/// The prefix extractor a recorded name stands for, if this program has it (`Some(None)`
/// for the empty name: no extractor).
#[allow(clippy::option_option)]
fn resolve_extractor(base: &Options, name: &str) -> Option<Option<Arc<dyn PrefixExtractor>>> {
    if name.is_empty() {
        return Some(None);
    }
    if let Some(p) = base.prefix_extractor.as_ref().filter(|p| p.name() == name) {
        return Some(Some(Arc::clone(p)));
    }
    let len: usize = name.strip_prefix("bloomkv.FixedPrefix.")?.parse().ok()?;
    let fixed = FixedPrefix::new(len);
    // Only the canonical spelling: `FixedPrefix.04` is not what `FixedPrefix::new(4)` records.
    (fixed.name() == name).then(|| Some(Arc::new(fixed) as Arc<dyn PrefixExtractor>))
}

/// Backslash, newline and carriage return as `\\`, `\n`, `\r`: one line per setting
/// whatever a name holds.
fn escape(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c => out.push(c),
        }
    }
    out
}

fn unescape(v: &str) -> Option<String> {
    let mut out = String::with_capacity(v.len());
    let mut chars = v.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next()? {
            '\\' => out.push('\\'),
            'n' => out.push('\n'),
            'r' => out.push('\r'),
            _ => return None,
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::mem::MemFileSystem;

    fn path() -> &'static Path {
        Path::new("SETTINGS")
    }

    #[test]
    fn defaults_round_trip_and_apply_to_themselves() {
        let s = Settings::of(&Options::default());
        let back = Settings::decode(&s.encode(), path()).unwrap();
        assert_eq!(back, s);
        let loaded = back.apply(Options::default());
        assert!(loaded.unresolved.is_empty() && loaded.ignored.is_empty());
        assert_eq!(Settings::of(&loaded.options), s);
    }

    #[test]
    fn zstd_and_the_bottommost_compression_come_back() {
        for (compression, bottommost) in [
            (Compression::Lz4, Some(Compression::Zstd { level: 7 })),
            (Compression::Zstd { level: 1 }, None),
            (Compression::None, Some(Compression::Lz4)),
        ] {
            let written = Options {
                compression,
                bottommost_compression: bottommost,
                ..Options::default()
            };
            let s = Settings::of(&written);
            let loaded = Settings::decode(&s.encode(), path())
                .unwrap()
                .apply(Options::default());
            assert!(loaded.ignored.is_empty(), "{:?}", loaded.ignored);
            assert_eq!(loaded.options.compression, compression);
            assert_eq!(loaded.options.bottommost_compression, bottommost);
            assert_eq!(Settings::of(&loaded.options), s);
        }
        // Only the spelling `of` writes is read; a level out of range is refused.
        for bad in ["zstd(3)", "Zstd(0)", "Zstd(23)", "Zstd"] {
            let mut s = Settings::of(&Options::default());
            for (k, v) in s.entries.iter_mut() {
                if k == "bottommost_compression" {
                    *v = bad.into();
                }
            }
            let loaded = s.apply(Options::default());
            assert_eq!(loaded.ignored.len(), 1, "{bad}: {:?}", loaded.ignored);
            assert_eq!(loaded.options.bottommost_compression, None, "{bad}");
        }
    }

    #[test]
    fn every_recorded_field_comes_back() {
        let written = Options {
            bits_per_key: 7.5,
            filter: FilterKind::Ribbon,
            filter_allocation: FilterAllocation::Monkey,
            optimize_filters_for_hits: true,
            bloom_before_level: 2,
            prefix_extractor: Some(Arc::new(FixedPrefix::new(3))),
            range_filter: Some(RangeFilterOptions {
                bits_per_key: 12.0,
                max_range_len: 32,
            }),
            compression: Compression::Lz4,
            block_size: 2048,
            block_align: false,
            restart_interval: 8,
            memtable_size: 1 << 20,
            max_immutable_memtables: 3,
            l0_compaction_trigger: 6,
            level0_slowdown_writes_trigger: 30,
            level0_stop_writes_trigger: 40,
            level1_max_bytes: 1 << 24,
            level_size_multiplier: 8,
            dynamic_level_bytes: false,
            target_file_size: 1 << 21,
            ..Options::default()
        };
        let s = Settings::of(&written);
        let loaded = Settings::decode(&s.encode(), path())
            .unwrap()
            .apply(Options::default());
        assert!(loaded.unresolved.is_empty(), "{:?}", loaded.unresolved);
        assert!(loaded.ignored.is_empty(), "{:?}", loaded.ignored);
        assert_eq!(Settings::of(&loaded.options), s);
        assert_eq!(format!("{:?}", loaded.options), format!("{written:?}"));
    }

    /// docs/FORMAT.md shows a default store's file as this build writes it.
    #[test]
    fn the_format_doc_shows_the_defaults_as_written() {
        let doc = include_str!("../../../docs/FORMAT.md");
        let text = String::from_utf8(Settings::of(&Options::default()).encode()).unwrap();
        assert!(
            doc.contains(&format!("```text\n{text}```")),
            "FORMAT.md's settings example differs; this build writes\n{text}"
        );
    }

    #[test]
    fn every_flipped_byte_and_every_cut_is_refused() {
        let bytes = Settings::of(&Options::default()).encode();
        for i in 0..bytes.len() {
            for bit in [0x01u8, 0x20, 0x80] {
                let mut b = bytes.clone();
                b[i] ^= bit;
                assert!(
                    Settings::decode(&b, path()).is_err(),
                    "byte {i} bit {bit:#x}"
                );
            }
        }
        for len in 0..bytes.len() {
            assert!(
                Settings::decode(&bytes[..len], path()).is_err(),
                "cut at {len}"
            );
        }
    }

    #[test]
    fn names_with_line_breaks_are_escaped() {
        let mut s = Settings::of(&Options::default());
        s.entries[1].1 = "my\\odd\nname\r".into();
        let back = Settings::decode(&s.encode(), path()).unwrap();
        assert_eq!(back.get("filter"), Some("my\\odd\nname\r"));
    }

    #[test]
    fn an_unknown_policy_or_extractor_is_reported_not_guessed() {
        let mut s = Settings::of(&Options::default());
        for (k, v) in &mut s.entries {
            match k.as_str() {
                "filter" => *v = "myapp.Strict16".into(),
                "prefix_extractor" => *v = "myapp.Tenant".into(),
                "compression" => *v = "Zstd".into(),
                _ => {}
            }
        }
        s.entries.push(("future_knob".into(), "1".into()));
        let loaded = s.apply(Options::default());
        assert_eq!(loaded.unresolved.len(), 2, "{:?}", loaded.unresolved);
        assert!(loaded.unresolved[0].contains("myapp.Strict16"));
        assert!(loaded.unresolved[1].contains("myapp.Tenant"));
        assert_eq!(loaded.ignored.len(), 2, "{:?}", loaded.ignored);
        assert_eq!(loaded.options.filter, FilterKind::CacheLocalBloom);
        assert!(loaded.options.prefix_extractor.is_none());
        assert_eq!(loaded.options.compression, Compression::None);
    }

    #[test]
    fn a_fixed_prefix_name_must_be_canonical() {
        let base = Options::default();
        assert!(resolve_extractor(&base, "bloomkv.FixedPrefix.04").is_none());
        assert!(resolve_extractor(&base, "bloomkv.FixedPrefix.4").is_some());
    }

    #[test]
    fn at_open_writes_only_what_differs() {
        let fs = MemFileSystem::new();
        let dir = Path::new("/db");
        fs.create_dir_all(dir).unwrap();
        let o = Options::default();
        let r = at_open(&fs, dir, &o).unwrap();
        assert_eq!(
            (r.found, r.differed, r.written),
            (SettingsState::Missing, false, true)
        );
        let r = at_open(&fs, dir, &o).unwrap();
        assert_eq!(
            (r.found, r.differed, r.written),
            (SettingsState::Recorded, false, false)
        );
        let lz4 = Options {
            compression: Compression::Lz4,
            ..Options::default()
        };
        let r = at_open(&fs, dir, &lz4).unwrap();
        assert_eq!((r.differed, r.written), (true, true));
        assert_eq!(
            Settings::read(&fs, dir)
                .unwrap()
                .unwrap()
                .get("compression"),
            Some("Lz4")
        );
    }
}
