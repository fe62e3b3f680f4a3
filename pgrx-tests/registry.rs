//! The registry's SQL side in one server: the fields of each layout as 0.3.0's members name it,
//! written in SQL for them (sql/registry_compat.sql), are those of core/src/layout.rs.

#[pgrx::pg_schema]
mod tests {
    use crate::layout::{self, Order, Preset};
    use crate::pg_tests::one;
    use pgrx::prelude::*;

    fn fields_of(description: &str) -> String {
        one(&format!(
            "SELECT concat_ws(' ', f.epoch_ms, f.unit_ms, f.time_bits, f.worker_bits,
                              f.sequence_bits, f.worker_last)
               FROM snowflake.snowflake_registry_layout_fields('{description}') f"
        ))
    }

    fn fields(l: &layout::Layout) -> String {
        format!(
            "{} {} {} {} {} {}",
            l.epoch_unix_ms,
            l.unit_ms,
            l.time_bits,
            l.worker_bits,
            l.sequence_bits,
            if l.order == Order::SequenceThenWorker { "t" } else { "f" }
        )
    }

    #[pg_test]
    fn the_registry_knows_every_layout_by_the_fields_of_layout_rs() {
        for preset in Preset::ALL {
            let Some(l) = preset.layout() else { continue };
            assert_eq!(fields_of(&l.describe()), fields(&l), "{}", preset.name());
        }
        let custom = layout::Layout::custom(1_600_000_000_123, 4, 40, 11, 12, i64::MAX).unwrap();
        assert_eq!(fields_of(&custom.describe()), fields(&custom));
        assert_eq!(fields_of("sonyflak"), "");
    }
}
