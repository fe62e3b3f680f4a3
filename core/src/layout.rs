//! The bit layout of an id and the rule that advances the generator, in pure Rust.
//!
//! The default layout is Twitter's, so that common decoders agree with ours bit for bit:
//!
//! ```text
//!  63  62                                         22 21        12 11          0
//! +---+---------------------------------------------+------------+-------------+
//! | 0 |  milliseconds since 2010-11-04 01:42:54.657  | worker id  |  sequence   |
//! +---+---------------------------------------------+------------+-------------+
//!   1                     41 bits                       10 bits      12 bits
//! ```
//!
//! Other layouts change the epoch, the time unit (1 ms to 1 s), the three widths, and for
//! Sonyflake the order of the two low fields (sequence above machine id). A [`Layout`] is chosen
//! once at server start (see `gucs`) and never changes while the server runs.
//!
//! The generator does not store ids. It stores a *tick*: the id without its worker bits,
//! `units << sequence_bits | sequence`, a counter in which a full sequence carries into the next
//! time unit by plain `+ 1`. In both field orders the id is increasing in the tick for a fixed
//! worker, so "ticks increase" is "ids increase". Nothing here knows about PostgreSQL; every rule
//! is covered by plain `#[test]`s with an injected clock, on every preset and on odd widths.

use crate::text::iso_unix;

/// The presets, by the name `snowflake.layout` takes, and `custom`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Preset {
    Twitter,
    Discord,
    Sonyflake,
    Instagram,
    Js53,
    Custom,
}

impl Preset {
    pub const ALL: [Preset; 6] = [
        Preset::Twitter,
        Preset::Discord,
        Preset::Sonyflake,
        Preset::Instagram,
        Preset::Js53,
        Preset::Custom,
    ];

    pub const fn name(self) -> &'static str {
        match self {
            Preset::Twitter => "twitter",
            Preset::Discord => "discord",
            Preset::Sonyflake => "sonyflake",
            Preset::Instagram => "instagram",
            Preset::Js53 => "js53",
            Preset::Custom => "custom",
        }
    }

    /// By the rule of PostgreSQL's enum settings, which `snowflake.layout` is: the whole text,
    /// ignoring case only. Nothing is trimmed: `'twitter '` and `E'twitter\n'` name no layout,
    /// in `snowflake_decode(id, layout)` as in the setting (0.5.0 trimmed the argument only).
    pub fn parse(name: &str) -> Option<Preset> {
        Preset::ALL.into_iter().find(|p| {
            p.name().eq_ignore_ascii_case(mutant!(settings_trimmed, { name }, { name.trim() }))
        })
    }

    /// The preset's layout; `None` for `custom`, whose fields come from the settings.
    pub const fn layout(self) -> Option<Layout> {
        match self {
            Preset::Twitter => Some(TWITTER),
            Preset::Discord => Some(DISCORD),
            Preset::Sonyflake => Some(SONYFLAKE),
            Preset::Instagram => Some(INSTAGRAM),
            Preset::Js53 => Some(JS53),
            Preset::Custom => None,
        }
    }
}

/// Where the worker id sits: between time and sequence (Twitter and most layouts), or in the
/// lowest bits (Sonyflake's machine id).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Order {
    WorkerThenSequence,
    SequenceThenWorker,
}

/// A layout: the epoch, the time unit and the widths of the three fields, which add up to 63 or
/// fewer so that bit 63, the sign of a bigint, stays 0. (Instagram's own layout adds up to 64:
/// its ids would turn negative in 2046, so the generator ends there; decoding reads all 64 bits.)
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    pub preset: Preset,
    /// Unix milliseconds of time unit 0.
    pub epoch_unix_ms: i64,
    /// Milliseconds per time unit, 1 to 1000.
    pub unit_ms: u64,
    pub time_bits: u32,
    pub worker_bits: u32,
    pub sequence_bits: u32,
    pub order: Order,
}

/// 2010-11-04 01:42:54.657 UTC, 41 bits of ms, 10 worker bits, 12 of sequence: until 2080-07-10.
pub const TWITTER: Layout = Layout {
    preset: Preset::Twitter,
    epoch_unix_ms: 1_288_834_974_657,
    unit_ms: 1,
    time_bits: 41,
    worker_bits: 10,
    sequence_bits: 12,
    order: Order::WorkerThenSequence,
};

/// Twitter's widths from 2015-01-01 UTC, as Discord's ids (whose 10 low-middle bits are a
/// 5-bit worker and a 5-bit process id: together our worker id). Until 2084-09-06.
pub const DISCORD: Layout =
    Layout { preset: Preset::Discord, epoch_unix_ms: 1_420_070_400_000, ..TWITTER };

/// Sonyflake: 39 bits of 10 ms since 2014-09-01 UTC, then 8 bits of sequence, then a 16-bit
/// machine id in the lowest bits. Until 2188-11-16.
pub const SONYFLAKE: Layout = Layout {
    preset: Preset::Sonyflake,
    epoch_unix_ms: 1_409_529_600_000,
    unit_ms: 10,
    time_bits: 39,
    worker_bits: 16,
    sequence_bits: 8,
    order: Order::SequenceThenWorker,
};

/// Instagram's: 41 bits of ms since 2011-08-24 21:07:01.721 UTC, 13 bits of shard id, 10 of
/// sequence. 64 bits in all, so ids stay positive only until 2046-06-27, the end here.
pub const INSTAGRAM: Layout = Layout {
    preset: Preset::Instagram,
    epoch_unix_ms: 1_314_220_021_721,
    unit_ms: 1,
    time_bits: 41,
    worker_bits: 13,
    sequence_bits: 10,
    order: Order::WorkerThenSequence,
};

/// Ids below 2^53, which JavaScript numbers and most JSON parsers hold exactly: 38 bits of 10 ms
/// since 2025-01-01 UTC (until 2112-02-09), 64 workers, 512 ids per 10 ms per worker (51 200
/// per second, more by borrowing time).
pub const JS53: Layout = Layout {
    preset: Preset::Js53,
    epoch_unix_ms: 1_735_689_600_000,
    unit_ms: 10,
    time_bits: 38,
    worker_bits: 6,
    sequence_bits: 9,
    order: Order::WorkerThenSequence,
};

/// 9999-12-31 23:59:59.999 UTC: a custom layout may not end later, so that every moment it can
/// hold is a timestamp that PostgreSQL and every client print without trouble.
pub const LATEST_END_UNIX_MS: i64 = 253_402_300_799_999;

/// Why a layout was refused: a custom one at start, or one read back from a state file or WAL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Invalid(pub String);

impl Layout {
    /// Checks a custom layout; `now_unix_ms` is the clock at start (the epoch may not be later).
    pub fn custom(
        epoch_unix_ms: i64,
        unit_ms: u64,
        time_bits: u32,
        worker_bits: u32,
        sequence_bits: u32,
        now_unix_ms: i64,
    ) -> Result<Layout, Invalid> {
        let layout = Layout {
            preset: Preset::Custom,
            epoch_unix_ms,
            unit_ms,
            time_bits,
            worker_bits,
            sequence_bits,
            order: Order::WorkerThenSequence,
        };
        layout.check()?;
        if epoch_unix_ms > now_unix_ms {
            return Err(Invalid(format!(
                "snowflake.epoch {} lies in the future",
                iso_unix(epoch_unix_ms)
            )));
        }
        Ok(layout)
    }

    /// The rules every layout read from a setting, a state file or WAL must follow.
    pub fn check(&self) -> Result<(), Invalid> {
        if let Some(preset) = self.preset.layout() {
            if preset != *self {
                return Err(Invalid(format!(
                    "the fields differ from those of the {} preset",
                    self.preset.name()
                )));
            }
            return Ok(());
        }
        let total = self.time_bits + self.worker_bits + self.sequence_bits;
        let why = if !(1..=1000).contains(&self.unit_ms) {
            format!("a time unit of {} ms is not between 1 ms and 1 s", self.unit_ms)
        } else if self.time_bits == 0 {
            "snowflake.time_bits must be at least 1".into()
        } else if self.worker_bits > 31 || self.sequence_bits > 31 {
            "snowflake.worker_bits and snowflake.sequence_bits may be at most 31".into()
        } else if total > 63 {
            format!(
                "the widths add up to {total} bits ({} + {} + {}); an id has 63 besides its \
                 sign",
                self.time_bits, self.worker_bits, self.sequence_bits
            )
        } else if self.end_unix_ms().is_none_or(|end| end > LATEST_END_UNIX_MS) {
            "the layout would last past the year 9999: use fewer time bits or a shorter time \
             unit"
                .into()
        } else {
            return Ok(());
        };
        Err(Invalid(why))
    }

    /// Whether two layouts make the same ids: the same everything but the preset's name (a
    /// custom layout with Twitter's fields is Twitter's).
    pub fn same_ids(&self, other: &Layout) -> bool {
        Layout { preset: Preset::Custom, ..*self } == Layout { preset: Preset::Custom, ..*other }
    }

    pub const fn max_worker_id(&self) -> u32 {
        ((1u64 << self.worker_bits) - 1) as u32
    }

    /// Ids per time unit per worker, without borrowing time.
    pub const fn per_unit(&self) -> u64 {
        1 << self.sequence_bits
    }

    const fn low_bits(&self) -> u32 {
        self.worker_bits + self.sequence_bits
    }

    /// The time field's largest value: the last time unit of any id the layout's bits hold,
    /// those with the sign bit set included (Instagram's after 2046, which `parts` splits and
    /// `compose` makes, but the generator never hands out).
    pub const fn max_field_units(&self) -> u64 {
        if self.time_bits >= 64 {
            u64::MAX
        } else {
            (1u64 << self.time_bits) - 1
        }
    }

    /// The last time unit an id can hold: the time field's largest value, or less if a larger
    /// one would set the sign bit (Instagram's).
    pub const fn max_units(&self) -> u64 {
        let field = (1u64 << self.time_bits) - 1;
        let positive = (i64::MAX as u64) >> self.low_bits();
        if field < positive {
            field
        } else {
            positive
        }
    }

    /// The highest durable mark there can be: a mark is a time unit no id has reached, so one
    /// past the last says "every id is used up". A mark read back from the state file or WAL
    /// that is higher did not come from this layout: it is corrupt.
    pub const fn end_mark(&self) -> u64 {
        self.max_units() + 1
    }

    /// The last Unix millisecond an id can hold; `None` if that overflows.
    pub fn end_unix_ms(&self) -> Option<i64> {
        let units = i64::try_from(self.end_mark()).ok()?;
        units.checked_mul(self.unit_ms as i64)?.checked_add(self.epoch_unix_ms)?.checked_sub(1)
    }

    /// The first Unix millisecond of time unit `units`. The caller keeps `units` at most
    /// [`end_mark`](Self::end_mark), for which `check` proved this does not overflow.
    pub const fn unix_ms(&self, units: u64) -> i64 {
        self.epoch_unix_ms + (units * self.unit_ms) as i64
    }

    /// The time unit of a Unix millisecond; `None` before the epoch.
    #[inline]
    pub const fn units_at(&self, unix_ms: i64) -> Option<u64> {
        if unix_ms < self.epoch_unix_ms {
            return None;
        }
        let ms = (unix_ms - self.epoch_unix_ms) as u64;
        // A division costs more than the rest of the hot path's arithmetic: skip it for 1 ms.
        Some(if self.unit_ms == 1 { ms } else { ms / self.unit_ms })
    }

    /// Whole time units in `ms` milliseconds (a bound given in ms, rounded down). On the hot
    /// path, like `units_at`, so without a division for 1 ms units.
    #[inline]
    pub const fn units_in(&self, ms: u64) -> u64 {
        if self.unit_ms == 1 {
            ms
        } else {
            ms / self.unit_ms
        }
    }

    /// Time units covering `ms` milliseconds, at least one (a lease length given in ms).
    pub const fn units_covering(&self, ms: u64) -> u64 {
        let units = ms.div_ceil(self.unit_ms);
        if units == 0 {
            1
        } else {
            units
        }
    }

    /// The first tick of time unit `units`, which is at most [`end_mark`](Self::end_mark) (so
    /// that no bit is shifted out).
    #[inline]
    pub const fn tick_at(&self, units: u64) -> Tick {
        assert!(units <= self.end_mark(), "a time past the end of the layout");
        Tick(units << self.sequence_bits)
    }

    #[inline]
    pub const fn units(&self, tick: Tick) -> u64 {
        tick.0 >> self.sequence_bits
    }

    #[cfg(test)]
    pub const fn sequence(&self, tick: Tick) -> u32 {
        (tick.0 & (self.per_unit() - 1)) as u32
    }

    /// The id a tick makes for `worker_id`. The caller guarantees `worker_id <= max_worker_id()`
    /// and `units(tick) <= max_units()`, so bit 63 stays 0 and the id is a non-negative `i64`.
    #[inline]
    pub const fn id(&self, tick: Tick, worker_id: u32) -> i64 {
        let id = match self.order {
            Order::WorkerThenSequence => {
                let time = (tick.0 >> self.sequence_bits) << self.low_bits();
                let worker = (worker_id as u64) << self.sequence_bits;
                time | worker | (tick.0 & (self.per_unit() - 1))
            }
            Order::SequenceThenWorker => (tick.0 << self.worker_bits) | worker_id as u64,
        };
        id as i64
    }

    /// The id of `parts`: the inverse of [`parts`](Self::parts). The caller keeps every field in
    /// range: `units <= max_units()`, the worker id at most `max_worker_id()`, the sequence
    /// below `per_unit()`.
    pub const fn compose(&self, parts: Parts) -> i64 {
        self.id(Tick((parts.units << self.sequence_bits) | parts.sequence as u64), parts.worker_id)
    }

    /// The smallest id of time unit `units` (worker 0, sequence 0), as an unsigned number so
    /// that one past the end of a 64-bit layout still fits.
    pub const fn first_id(&self, units: u64) -> u64 {
        units << self.low_bits()
    }

    /// The smallest time unit whose ids are all at or above `id`: how a mark of one layout
    /// becomes a mark of another, since ids of all layouts compare as plain integers.
    pub const fn units_from_id(&self, id: u64) -> u64 {
        id.div_ceil(1 << self.low_bits())
    }

    /// Splits an id. `None` for an id this layout cannot make: one with bits above its widths
    /// (a negative id, in every layout narrower than 64 bits).
    pub const fn parts(&self, id: i64) -> Option<Parts> {
        let id = id as u64;
        let total = self.time_bits + self.low_bits();
        if total < 64 && id >> total != 0 {
            return None;
        }
        let worker_mask = (1u64 << self.worker_bits) - 1;
        let sequence_mask = self.per_unit() - 1;
        let (worker_id, sequence) = match self.order {
            Order::WorkerThenSequence => {
                ((id >> self.sequence_bits) & worker_mask, id & sequence_mask)
            }
            Order::SequenceThenWorker => {
                (id & worker_mask, (id >> self.worker_bits) & sequence_mask)
            }
        };
        Some(Parts {
            units: id >> self.low_bits(),
            worker_id: worker_id as u32,
            sequence: sequence as u32,
        })
    }

    /// The advance rule: the smallest tick above `prev` that is not behind the clock.
    ///
    /// `max(prev + 1, now << s | (prev + 1) & (2^s - 1))` with `s` sequence bits:
    /// - Ids strictly increase whatever the clock does: the result always exceeds `prev`.
    /// - When the clock is behind (`now` stepped back, or earlier calls borrowed time ahead),
    ///   `prev + 1` wins: the sequence counts on and a full sequence carries into the next time
    ///   unit instead of spinning on the clock, so a burst above 2^s ids per unit borrows time.
    /// - When the clock has moved on, the time jumps to `now` but the sequence keeps counting
    ///   from `prev` instead of restarting at 0. Twitter's rule restarts it at 0, so at low
    ///   traffic every id ends in twelve zero bits and `id % n` puts every row in one shard.
    ///   Counting on keeps the low bits uniform at no cost in capacity: once a unit's sequence
    ///   wraps, later ticks are `prev + 1` until the clock catches up, so 2^s ids per unit
    ///   still fit.
    /// - The borrowed time is bounded: past `max_drift` units ahead of the clock the rule
    ///   refuses.
    pub const fn advance(&self, prev: Tick, now: u64, max_drift: u64) -> Advance {
        // Also keeps `now << sequence_bits` from shifting bits out for an absurd clock.
        if now > self.max_units() {
            return Advance::Exhausted;
        }
        let succ = prev.0 + 1;
        let clocked = (now << self.sequence_bits) | (succ & (self.per_unit() - 1));
        let next = Tick(mutant!(
            clock_rule,
            {
                if clocked > succ {
                    clocked
                } else {
                    succ
                }
            },
            { clocked }
        ));
        if self.units(next) > self.max_units() {
            return Advance::Exhausted;
        }
        // `units(next) > now` only while borrowing; saturating keeps a clock past the end safe.
        let ahead = self.units(next).saturating_sub(now);
        if ahead > max_drift {
            return Advance::TooFarAhead { ahead };
        }
        Advance::To(next)
    }

    /// A one-line description for messages: the name, or for `custom` its fields.
    /// The name and every field, as the registry describes a namespace's layout: two layouts
    /// of other names may have the same fields (and make the same ids).
    pub fn describe_fields(&self) -> String {
        format!(
            "{} ({} bits of {} ms since {}, {} worker bits, {} sequence bits{})",
            self.preset.name(),
            self.time_bits,
            self.unit_ms,
            iso_unix(self.epoch_unix_ms),
            self.worker_bits,
            self.sequence_bits,
            match self.order {
                Order::WorkerThenSequence => "",
                Order::SequenceThenWorker => ", worker id last",
            }
        )
    }

    pub fn describe(&self) -> String {
        match self.preset {
            Preset::Custom => format!(
                "custom ({} bits of {} ms since {}, {} worker bits, {} sequence bits)",
                self.time_bits,
                self.unit_ms,
                iso_unix(self.epoch_unix_ms),
                self.worker_bits,
                self.sequence_bits
            ),
            preset => preset.name().into(),
        }
    }
}

/// An id without its worker bits: `units << sequence_bits | sequence`. Ordering ticks orders
/// ids of one worker.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Tick(pub u64);

/// The three fields of an id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Parts {
    /// Time units since the layout's epoch.
    pub units: u64,
    pub worker_id: u32,
    pub sequence: u32,
}

/// What the generator should do next, given the last tick handed out and the clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Advance {
    /// Hand out this tick.
    To(Tick),
    /// The next tick would run more than the allowed drift ahead of the clock: it lies `ahead`
    /// time units in the clock's future. Wait for the clock or fail.
    TooFarAhead { ahead: u64 },
    /// The next tick would not fit in the layout's time field.
    Exhausted,
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: Layout = TWITTER;
    const DRIFT: u64 = 10_000;

    /// Every preset, and custom layouts with odd widths: 0 worker bits, 0 sequence bits, 1 s
    /// ticks, 1 time bit too few for the clock, seed 000's 28/24/11 in seconds and seed 003's
    /// 37/20/16.
    fn all_layouts() -> Vec<Layout> {
        let now = 1_790_000_000_000;
        let mut v: Vec<Layout> = Preset::ALL.iter().filter_map(|p| p.layout()).collect();
        for (epoch, unit, t, w, s) in [
            (0, 7, 43, 0, 20),
            (1_600_000_000_000, 1, 45, 18, 0),
            (1_700_000_000_000, 1000, 28, 24, 11),
            (1_600_000_000_000, 1, 37, 20, 6),
            (1_262_304_000_000, 1000, 37, 20, 6),
            (1_000, 3, 40, 1, 1),
        ] {
            v.push(Layout::custom(epoch, unit, t, w, s, now).unwrap());
        }
        v
    }

    fn to(a: Advance) -> Tick {
        match a {
            Advance::To(t) => t,
            other => panic!("expected a tick, got {other:?}"),
        }
    }

    #[test]
    fn known_answer_for_2020_new_year() {
        // Computed independently (Python): 2020-01-01T00:00:00Z, worker 5, sequence 7.
        let id: i64 = 1_212_161_512_043_466_759;
        let p = T.parts(id).unwrap();
        assert_eq!(T.unix_ms(p.units), 1_577_836_800_000);
        assert_eq!((p.worker_id, p.sequence), (5, 7));
        assert_eq!(T.id(T.tick_at(p.units), 0) | 5 << 12 | 7, id);
    }

    #[test]
    fn known_answers_for_the_other_presets() {
        // Discord's documented example: 175928847299117063 is 2016-04-30 11:18:25.796 UTC,
        // internal worker 1 and process 0 (together worker id 1 << 5 = 32), increment 7.
        let p = DISCORD.parts(175_928_847_299_117_063).unwrap();
        assert_eq!(DISCORD.unix_ms(p.units), 1_462_015_105_796);
        assert_eq!((p.worker_id, p.sequence), (32, 7));
        // Sonyflake, worked out from sony/sonyflake's Decompose (time = id >> 24, sequence =
        // id >> 16 & 0xff, machine-id = id & 0xffff; the time counts 10 ms units since
        // 2014-09-01 UTC): time 12345678 (2014-09-02 10:17:36.780), sequence 3, machine 4242.
        let id = 12_345_678i64 << 24 | 3 << 16 | 4242;
        let p = SONYFLAKE.parts(id).unwrap();
        assert_eq!((p.units, p.sequence, p.worker_id), (12_345_678, 3, 4242));
        assert_eq!(SONYFLAKE.unix_ms(p.units), 1_409_529_600_000 + 123_456_780);
        assert_eq!(SONYFLAKE.id(Tick(12_345_678 << 8 | 3), 4242), id);
        // The worked example of Instagram's engineering post "Sharding & IDs at Instagram":
        // 1387263000 ms after the epoch, shard 1341, sequence 5001 % 1024 = 1, with their
        // shifts of 23 and 10.
        let id = (1_387_263_000i64 << 23) | (1341 << 10) | 1;
        let p = INSTAGRAM.parts(id).unwrap();
        assert_eq!((p.units, p.worker_id, p.sequence), (1_387_263_000, 1341, 1));
        // An Instagram id past 2046 is negative as a bigint and still decodes.
        let late = INSTAGRAM.parts(-1).unwrap();
        assert_eq!(late.units, (1 << 41) - 1);
        // js53 ids stay below 2^53 up to its last tick.
        let last = JS53.tick_at(JS53.max_units()).0 | (JS53.per_unit() - 1);
        assert_eq!(JS53.id(Tick(last), JS53.max_worker_id()), (1i64 << 53) - 1);
    }

    #[test]
    fn preset_limits_and_end_dates() {
        let rows: Vec<(Layout, u32, u64, &str)> = vec![
            (TWITTER, 1023, 4096, "2080-07-10T17:30:30.208Z"),
            (DISCORD, 1023, 4096, "2084-09-06T15:47:35.551Z"),
            (SONYFLAKE, 65_535, 256, "2188-11-16T03:28:58.879Z"),
            (INSTAGRAM, 8191, 1024, "2046-06-27T17:00:49.496Z"),
            (JS53, 63, 512, "2112-02-09T13:44:29.439Z"),
        ];
        for (l, workers, per_unit, end) in rows {
            assert_eq!(l.max_worker_id(), workers, "{l:?}");
            assert_eq!(l.per_unit(), per_unit, "{l:?}");
            assert_eq!(iso_unix(l.end_unix_ms().unwrap()), end, "{l:?}");
            assert_eq!(l.check(), Ok(()));
            // The last id of the last unit is non-negative.
            let last = Tick(l.tick_at(l.max_units()).0 | (l.per_unit() - 1));
            assert!(l.id(last, l.max_worker_id()) >= 0);
        }
        assert_eq!(INSTAGRAM.max_units(), (1 << 40) - 1);
        assert_eq!(T.max_units(), (1 << 41) - 1);
    }

    /// The README's table of layouts says what the presets are: epoch, time field and unit,
    /// worker and sequence widths, workers, ids per second and the last id's day.
    #[test]
    fn the_readme_table_of_layouts_is_the_presets() {
        let readme = include_str!("../../README.md");
        let table = readme.split("| Layout | Epoch (UTC) |").nth(1).expect("the layouts table");
        let mut seen = 0;
        for p in Preset::ALL {
            let Some(l) = p.layout() else { continue };
            let name = format!("| `{}`", p.name());
            let row = table.lines().find(|r| r.starts_with(&name)).expect("a row a preset");
            let cells: Vec<&str> = row.split('|').map(str::trim).collect();
            let epoch = iso_unix(l.epoch_unix_ms).replace('T', " ").replace(".000Z", "");
            let epoch = epoch.trim_end_matches('Z').trim_end_matches(" 00:00:00");
            // In groups of three digits from 10 000 up, as the README writes numbers.
            let grouped = |n: u64| {
                let digits = n.to_string();
                if n < 10_000 {
                    return digits;
                }
                let mut out = String::new();
                for (i, c) in digits.chars().enumerate() {
                    if i > 0 && (digits.len() - i).is_multiple_of(3) {
                        out.push(' ');
                    }
                    out.push(c);
                }
                out
            };
            let expected = [
                epoch.to_string(),
                format!("{} bits of {} ms", l.time_bits, l.unit_ms),
                format!("{} bits", l.worker_bits),
                format!("{} bits", l.sequence_bits),
                grouped(u64::from(l.max_worker_id()) + 1),
                grouped(l.per_unit() * 1000 / l.unit_ms),
                iso_unix(l.end_unix_ms().unwrap())[..10].to_string(),
            ];
            for (cell, want) in cells[2..9].iter().zip(&expected) {
                assert!(cell.starts_with(want.as_str()), "{}: {cell:?} is not {want:?}", p.name());
            }
            seen += 1;
        }
        assert_eq!(seen, Preset::ALL.len() - 1, "every preset but custom has a row");
    }

    #[test]
    fn preset_names_parse_case_insensitively() {
        for p in Preset::ALL {
            assert_eq!(Preset::parse(p.name()), Some(p));
            assert_eq!(Preset::parse(&p.name().to_uppercase()), Some(p));
        }
        assert_eq!(Preset::parse("snowflake"), None);
        for padded in ["twitter ", " twitter", "twitter\n", "\ttwitter"] {
            assert_eq!(Preset::parse(padded), None, "{padded:?}");
        }
    }

    #[test]
    fn custom_layouts_are_checked() {
        let now = 1_790_000_000_000;
        let ok = |e, u, t, w, s| Layout::custom(e, u, t, w, s, now);
        assert!(ok(0, 1, 41, 10, 12).is_ok());
        assert!(ok(0, 1, 41, 10, 12).unwrap().same_ids(&Layout { epoch_unix_ms: 0, ..T }));
        let err = |r: Result<Layout, Invalid>| r.unwrap_err().0;
        assert!(err(ok(0, 1, 42, 10, 12)).contains("add up to 64 bits"));
        assert!(err(ok(0, 0, 41, 10, 12)).contains("not between 1 ms and 1 s"));
        assert!(err(ok(0, 1001, 41, 10, 12)).contains("not between 1 ms and 1 s"));
        assert!(err(ok(0, 1, 0, 10, 12)).contains("at least 1"));
        assert!(err(ok(0, 1, 20, 32, 0)).contains("at most 31"));
        assert!(err(ok(now + 1, 1, 41, 10, 12)).contains("in the future"));
        assert!(err(ok(0, 1000, 50, 1, 1)).contains("year 9999"));
        // The preset's own fields cannot be changed under its name.
        let mut bent = T;
        bent.unit_ms = 10;
        assert!(bent.check().unwrap_err().0.contains("twitter preset"));
    }

    #[test]
    fn pack_and_unpack_roundtrip_at_the_edges_of_every_layout() {
        for l in all_layouts() {
            let (mw, ms) = (l.max_worker_id(), (l.per_unit() - 1) as u32);
            for &(units, worker, seq) in &[
                (0u64, 0u32, 0u32),
                (0, mw, ms),
                (l.max_units(), mw, ms),
                (l.max_units(), 0, 0),
                (l.max_units() / 3, mw / 2, ms / 3),
            ] {
                let tick = Tick(units << l.sequence_bits | seq as u64);
                let id = l.id(tick, worker);
                assert!(id >= 0, "{l:?}: bit 63 set for {units} {worker} {seq}");
                let p = l.parts(id).unwrap();
                assert_eq!((p.units, p.worker_id, p.sequence), (units, worker, seq), "{l:?}");
            }
        }
        assert_eq!(T.id(Tick(T.max_units() << 12 | 4095), T.max_worker_id()), i64::MAX);
    }

    #[test]
    fn compose_is_the_inverse_of_parts_in_every_layout() {
        // Random ids of each layout's width (every bit random, xorshift64; the seed is fixed),
        // and random fields in range.
        let mut x: u64 = 0x0123_4567_89ab_cdef;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for l in all_layouts() {
            let bits = l.time_bits + l.worker_bits + l.sequence_bits;
            for _ in 0..20_000 {
                // Every bit of the layout's width: negative ids too in a 64-bit layout.
                let id = (next() & (u64::MAX >> (64 - bits))) as i64;
                let p = l.parts(id).unwrap();
                assert!(p.units <= l.max_field_units(), "{l:?}: {id}");
                assert!(bits == 64 || p.units <= l.max_units(), "{l:?}: {id}");
                assert_eq!(l.compose(p), id, "{l:?}");
                let q = Parts {
                    units: next() % (l.max_units() + 1),
                    worker_id: (next() % (u64::from(l.max_worker_id()) + 1)) as u32,
                    sequence: (next() % l.per_unit()) as u32,
                };
                let id = l.compose(q);
                assert!(id >= 0, "{l:?}: {q:?}");
                assert_eq!(l.parts(id), Some(q), "{l:?}");
            }
            let top = Parts {
                units: l.max_units(),
                worker_id: l.max_worker_id(),
                sequence: (l.per_unit() - 1) as u32,
            };
            assert_eq!(l.parts(l.compose(top)), Some(top), "{l:?}");
        }
    }

    #[test]
    fn ids_outside_a_layout_have_no_parts() {
        assert_eq!(T.parts(-1), None);
        assert_eq!(T.parts(i64::MIN), None);
        assert_eq!(JS53.parts(1 << 53), None);
        assert!(JS53.parts((1 << 53) - 1).is_some());
    }

    #[test]
    fn worker_bits_do_not_leak_into_neighbours() {
        for l in all_layouts() {
            let tick = Tick(7 << l.sequence_bits | (l.per_unit() - 1).min(5));
            let a = l.parts(l.id(tick, 0)).unwrap();
            let b = l.parts(l.id(tick, l.max_worker_id())).unwrap();
            assert_eq!((a.units, a.sequence), (b.units, b.sequence), "{l:?}");
            assert_eq!((a.worker_id, b.worker_id), (0, l.max_worker_id()));
        }
    }

    #[test]
    fn ids_of_one_worker_grow_with_the_tick_in_every_order() {
        for l in all_layouts() {
            let w = l.max_worker_id() / 2;
            let mut prev = l.id(Tick(0), w);
            for t in 1..5_000u64 {
                let id = l.id(Tick(t * 7 + t % 3), w);
                assert!(id > prev, "{l:?} at {t}");
                prev = id;
            }
        }
    }

    #[test]
    fn units_at_rejects_readings_before_the_epoch_and_floors() {
        assert_eq!(T.units_at(T.epoch_unix_ms), Some(0));
        assert_eq!(T.units_at(T.epoch_unix_ms + 5), Some(5));
        assert_eq!(T.units_at(T.epoch_unix_ms - 1), None);
        assert_eq!(SONYFLAKE.units_at(SONYFLAKE.epoch_unix_ms + 29), Some(2));
        assert_eq!(T.units_covering(1_500), 1_500);
        assert_eq!(SONYFLAKE.units_covering(1_500), 150);
        let seconds = Layout::custom(0, 1000, 30, 10, 12, 1).unwrap();
        assert_eq!(seconds.units_covering(500), 1);
        assert_eq!(seconds.units_in(10_000), 10);
    }

    #[test]
    fn marks_convert_between_layouts_through_the_ids() {
        // Every id below first_id(mark) in one layout is below the converted mark's ids.
        for a in all_layouts() {
            for b in all_layouts() {
                for mark in [0, 1, 12_345, a.end_mark() / 2, a.end_mark()] {
                    let bound = a.first_id(mark);
                    let converted = b.units_from_id(bound);
                    assert!(b.first_id(converted) >= bound, "{a:?} -> {b:?} at {mark}");
                    if converted > 0 {
                        assert!(b.first_id(converted - 1) < bound, "not the smallest");
                    }
                }
            }
        }
        assert_eq!(DISCORD.units_from_id(T.first_id(1_000)), 1_000);
    }

    #[test]
    fn clock_ahead_jumps_to_the_clock() {
        for l in all_layouts() {
            let t = to(l.advance(l.tick_at(100), 250, DRIFT));
            assert_eq!(l.units(t), 250);
        }
    }

    #[test]
    fn same_unit_counts_the_sequence_and_rolls_over_without_waiting() {
        for l in all_layouts() {
            let prev = Tick(100 << l.sequence_bits);
            let t = to(l.advance(prev, 100, DRIFT));
            if l.per_unit() > 1 {
                assert_eq!((l.units(t), l.sequence(t)), (100, 1), "{l:?}");
            }
            let full = Tick(100 << l.sequence_bits | (l.per_unit() - 1));
            let t = to(l.advance(full, 100, DRIFT));
            assert_eq!((l.units(t), l.sequence(t)), (101, 0), "{l:?}");
        }
    }

    #[test]
    fn sequence_keeps_counting_across_units_at_low_traffic() {
        // One id per millisecond: Twitter's rule would give sequence 0 every time.
        let mut t = T.tick_at(1_000);
        let mut seqs = Vec::new();
        for now in 1_001..1_101 {
            t = to(T.advance(t, now, DRIFT));
            assert_eq!(T.units(t), now);
            seqs.push(T.sequence(t));
        }
        assert_eq!(seqs, (1..=100).collect::<Vec<u32>>());
    }

    #[test]
    fn clock_behind_never_repeats_or_goes_back() {
        for l in all_layouts() {
            let prev = Tick(5_000 << l.sequence_bits);
            // The clock stepped back 3000 units.
            let t = to(l.advance(prev, 2_000, DRIFT));
            assert_eq!(t, Tick(prev.0 + 1));
            let u = to(l.advance(t, 1_000, DRIFT));
            assert!(u > t);
        }
    }

    #[test]
    fn a_burst_borrows_time_and_the_clock_catches_up() {
        for l in all_layouts() {
            // Three units' worth of ids inside one unit of clock borrow two more units.
            let mut t = l.tick_at(100);
            for _ in 0..3 * l.per_unit() {
                t = to(l.advance(t, 100, DRIFT));
            }
            assert_eq!(l.units(t), 103, "{l:?}");
            let u = to(l.advance(t, 110, DRIFT));
            assert_eq!(l.units(u), 110);
            assert!(u > t);
        }
    }

    #[test]
    fn sustained_overload_is_capped_at_the_layouts_rate() {
        // 10 000 ids per clock millisecond for 100 ms: the ticks advance 4096 per ms of borrowed
        // time.
        let mut t = T.tick_at(0);
        for now in 0..100u64 {
            for _ in 0..10_000 {
                t = to(T.advance(t, now, DRIFT));
            }
        }
        let ids = 100 * 10_000u64 + 1;
        assert_eq!(t.0, ids - 1, "every id consumed exactly one tick");
        assert_eq!(T.units(t), (ids - 1) / 4096);
    }

    #[test]
    fn drift_bound_refuses_beyond_the_limit() {
        for l in all_layouts() {
            // The last tick of unit 19 999: the next one is the first of unit 20 000.
            let prev = Tick(l.tick_at(20_000).0 - 1);
            assert!(matches!(l.advance(prev, 10_000, DRIFT), Advance::To(_)));
            assert_eq!(l.advance(prev, 9_999, DRIFT), Advance::TooFarAhead { ahead: 10_001 });
            // A zero bound still allows ids in the clock's own unit.
            if l.per_unit() > 1 {
                assert!(matches!(l.advance(l.tick_at(50), 50, 0), Advance::To(_)));
            }
            assert_eq!(
                l.advance(Tick(50 << l.sequence_bits | (l.per_unit() - 1)), 50, 0),
                Advance::TooFarAhead { ahead: 1 }
            );
        }
    }

    #[test]
    fn every_layout_ends_instead_of_wrapping() {
        for l in all_layouts() {
            let end = l.max_units();
            let last = Tick(end << l.sequence_bits | (l.per_unit() - 1));
            assert_eq!(l.advance(last, end, DRIFT), Advance::Exhausted, "{l:?}");
            assert_eq!(l.advance(l.tick_at(5), end + 1, DRIFT), Advance::Exhausted);
            let before_last = Tick(l.tick_at(end).0 - 1);
            assert!(matches!(l.advance(before_last, end, DRIFT), Advance::To(_)));
        }
        // 2080-07-10 17:30:30.208 UTC is Twitter's last representable millisecond.
        assert_eq!(T.unix_ms(T.max_units()), 3_487_858_230_208);
    }

    #[test]
    fn randomized_clocks_keep_ticks_strictly_increasing() {
        // A seeded xorshift walk of the clock, forward and back; print the seed on failure.
        for l in all_layouts() {
            let seed: u64 = 0x9e37_79b9_7f4a_7c15;
            let mut x = seed;
            let mut now: u64 = 1_000_000;
            let mut t = l.tick_at(now);
            for i in 0..50_000 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                match x % 8 {
                    0 => now = now.saturating_sub(x % 5_000),
                    1..=3 => now += x % 3,
                    _ => {}
                }
                match l.advance(t, now, DRIFT) {
                    Advance::To(u) => {
                        assert!(u > t, "{l:?} seed {seed:#x} step {i}: {u:?} <= {t:?}");
                        assert!(l.units(u) <= now + DRIFT, "{l:?} step {i}: beyond the bound");
                        t = u;
                    }
                    Advance::TooFarAhead { ahead } => {
                        assert!(ahead > DRIFT);
                        now += ahead; // the clock catches up, as a waiting caller would see
                    }
                    Advance::Exhausted => panic!("{l:?} step {i}: exhausted"),
                }
            }
        }
    }
}
