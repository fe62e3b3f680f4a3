//! Time ranges written as people think, `WHERE snowflake_timestamp(id) >= a AND
//! snowflake_timestamp(id) < b`, answered by the primary key index on `id`.
//!
//! Ids are ordered by time, so every comparison of `snowflake_timestamp(id)` with a value is a
//! range of `id`: the ids of time unit `u` are exactly `u << (worker + sequence bits)` up to the
//! next unit's first id, in every layout whose ids fill at most 63 bits. Before the planner
//! runs, this hook finds such comparisons among the AND-ed conditions of each `WHERE` and
//! `JOIN ... ON` and puts the equivalent condition on the id in their place:
//! `snowflake_timestamp(id) >= a` becomes `id >= snowflake_id_bound(a, 4)`, which the planner
//! folds to a constant and matches to the index like any `id >= 123`. Nothing is left to
//! re-check per row, so the query costs what the hand-written id range costs.
//!
//! It never changes which rows a query returns:
//! - The ranges are exact for every id the layout can hold, and they leave out the ids it
//!   cannot (negative ones, or those above its bits, such as 2^53 for `js53`), whose
//!   `snowflake_timestamp` is NULL: a comparison with it selects no row either.
//! - Comparisons in the ON clause of a FULL JOIN stay as written: such a join needs a condition
//!   it can merge or hash, which a range is not.
//! - Only a comparison of a plain column of a table, with a value that is neither volatile nor
//!   a set, is rewritten: `snowflake_timestamp(snowflake_next()) = x` is left as written, since
//!   the bounds would call the argument twice, and so is every comparison under a layout whose
//!   ids fill 64 bits (`instagram`, whose ids turn negative in 2046: time order is not bigint
//!   order there).
//! - Where the table needs the comparison itself, it keeps it beside the range: a table
//!   partitioned by an expression on `snowflake_timestamp` (partition pruning matches the
//!   partition key), and a table with an index on an expression that calls it.
//! - `SET snowflake.time_ranges = off` turns the hook off for a session (the differential
//!   tests compare both).
//!
//! The functions are found through the system caches, by the C symbol of `snowflake_timestamp`
//! and then by name and argument types in its schema, never through the search_path. The
//! rewritten query calls `snowflake_id_bound`, which the executor checks the current user may
//! run (PUBLIC may, unless an administrator revoked it): for a role that may not, the comparison
//! stays as written. Where rows or errors could differ between the two forms, they stay as
//! written too: a sub-select compared with `=` (two bounds would run it twice), and the
//! conditions of a FULL JOIN. A value that fails (a bad cast of a parameter) fails the rewritten
//! query when its scan starts, where the query as written might fail only on a row that reaches
//! the comparison: PostgreSQL evaluates conditions in the order its plan chooses, either way.
//!
//! Why a planner hook and not a `SUPPORT` function: PostgreSQL asks a support function for an
//! index condition (`SupportRequestIndexCondition`) only when one side of the comparison *is*
//! the indexed column, and then only the support function of the operator's own function
//! (indxpath.c, `match_opclause_to_indexcol`), here the built-in `timestamptz_ge`. A function
//! of the column on one side is never offered. TimescaleDB rewrites comparisons of its
//! `time_bucket(...)` the same way, for the same reason.
//!
//! What it does not see: comparisons inside OR, NOT or CASE, and in a sub-select of a WHERE
//! (`EXISTS (...)`). Those run as written.

use crate::errors::{self, Code};
use crate::gucs;
use pgrx::pg_sys;
use pgrx::prelude::*;
use pgrx::PgList;
use std::ffi::CStr;
use std::sync::atomic::{AtomicU32, Ordering};

/// PostgreSQL's B-tree strategy numbers: `<`, `<=`, `=`, `>=`, `>`.
const LESS: i32 = 1;
const LESS_EQUAL: i32 = 2;
const EQUAL: i32 = 3;
const GREATER_EQUAL: i32 = 4;
const GREATER: i32 = 5;

/// `int8 <= int8` and `int8 >= int8` (pg_operator.dat).
const INT8_LE: u32 = 414;
const INT8_GE: u32 = 415;

/// pg_language's `c`.
const C_LANGUAGE: u32 = 13;

static mut PREVIOUS: pg_sys::planner_hook_type = None;

/// The one relation the next query planned in this backend may read (`only_relation`); 0: any.
static ONLY_RELATION: AtomicU32 = AtomicU32::new(0);

/// Runs `f`, whose one query may plan nothing but a scan of relation `relid` (its inheritance
/// children and partitions included): a query whose name for it now leads elsewhere, to a view or
/// to another table, fails before it is planned, so that nothing of what it found runs.
/// `snowflake_adopt()` reads the largest id this way (adopt.rs). Views, rules and row-level
/// security are applied before the planner is called, so they all show in what it checks.
pub fn only_relation<T>(relid: pg_sys::Oid, f: impl FnOnce() -> T) -> T {
    struct Reset;
    impl Drop for Reset {
        fn drop(&mut self) {
            ONLY_RELATION.store(0, Ordering::Relaxed);
        }
    }
    ONLY_RELATION.store(relid.to_u32(), Ordering::Relaxed);
    let _reset = Reset;
    f()
}

/// # Safety
/// `parse` is a query tree from the rewriter.
#[pg_guard]
unsafe extern "C-unwind" fn check_only_relation(parse: *mut pg_sys::Query, relid: u32) {
    // SAFETY: the rewriter's query tree and its range table list.
    let reads_it = unsafe {
        let rtable = PgList::<pg_sys::RangeTblEntry>::from_pg((*parse).rtable);
        rtable.len() == 1
            && rtable.get_ptr(0).is_some_and(|rte| {
                (*rte).rtekind == pg_sys::RTEKind::RTE_RELATION && (*rte).relid.to_u32() == relid
            })
    };
    if !reads_it {
        query_redirected();
    }
}

/// Installs the hook. Only call while `shared_preload_libraries` is processed.
pub fn init() {
    // SAFETY: _PG_init runs once, on PostgreSQL's thread, before any query is planned.
    unsafe {
        PREVIOUS = pg_sys::planner_hook;
        pg_sys::planner_hook = Some(plan);
    }
}

/// The hook. Not `#[pg_guard]`: an error while planning (constant folding of a bad cast, say)
/// must pass from the planner to PostgreSQL untouched, as through a C hook, instead of being
/// turned into a Rust panic and back. This frame holds nothing to drop; only `rewrite`, which
/// runs Rust code, is guarded.
///
/// PostgreSQL 19 gives the hook, and `standard_planner`, a fifth argument (optimizer/planner.h):
/// the `ExplainState` of an `EXPLAIN`, NULL otherwise. It is passed on as it came: called with
/// four, 19's planner would read whatever the register held as that pointer.
///
/// # Safety
/// Called by PostgreSQL as its `planner_hook`, with the query it is about to plan.
unsafe extern "C-unwind" fn plan(
    parse: *mut pg_sys::Query,
    query_string: *const std::ffi::c_char,
    cursor_options: std::ffi::c_int,
    bound_params: pg_sys::ParamListInfo,
    #[cfg(feature = "pg19")] es: *mut pg_sys::ExplainState,
) -> *mut pg_sys::PlannedStmt {
    // SAFETY: PostgreSQL passes the query it is about to plan, which the planner may change;
    // the previous hook and standard_planner are PostgreSQL's own C functions.
    unsafe {
        if mutant!(adopt_plan_guard, { ONLY_RELATION.load(Ordering::Relaxed) != 0 }, { false }) {
            check_only_relation(parse, ONLY_RELATION.swap(0, Ordering::Relaxed));
        }
        rewrite(parse);
        #[cfg(feature = "pg19")]
        let planned = match PREVIOUS {
            Some(previous) => previous(parse, query_string, cursor_options, bound_params, es),
            None => standard_planner(parse, query_string, cursor_options, bound_params, es),
        };
        #[cfg(not(feature = "pg19"))]
        let planned = match PREVIOUS {
            Some(previous) => previous(parse, query_string, cursor_options, bound_params),
            None => standard_planner(parse, query_string, cursor_options, bound_params),
        };
        planned
    }
}

unsafe extern "C-unwind" {
    /// PostgreSQL's planner, called directly rather than through pgrx's error-catching wrapper.
    fn standard_planner(
        parse: *mut pg_sys::Query,
        query_string: *const std::ffi::c_char,
        cursor_options: std::ffi::c_int,
        bound_params: pg_sys::ParamListInfo,
        #[cfg(feature = "pg19")] es: *mut pg_sys::ExplainState,
    ) -> *mut pg_sys::PlannedStmt;
}

/// # Safety
/// `parse` is a query tree from the parser or rewriter, which the planner is about to plan.
#[pg_guard]
unsafe extern "C-unwind" fn rewrite(parse: *mut pg_sys::Query) {
    let layout = gucs::layout();
    if mutant!(
        planner_64bit,
        {
            !gucs::time_ranges()
                || layout.time_bits + layout.worker_bits + layout.sequence_bits > 63
        },
        { !gucs::time_ranges() }
    ) {
        return;
    }
    // The largest id the layout can hold: ids above it are outside its bits.
    let max_id = mutant!(planner_64bit, { layout.first_id(layout.end_mark()) - 1 }, {
        (layout.first_id(layout.end_mark()) - 1).min(i64::MAX as u64)
    });
    // SAFETY: see above.
    unsafe { add_id_ranges(parse, max_id as i64) };
}

/// Adds the implied id ranges in a query, its sub-queries in FROM and its CTEs.
///
/// # Safety
/// `query` is null or a valid Query whose nodes this module may replace.
unsafe fn add_id_ranges(query: *mut pg_sys::Query, max_id: i64) {
    // SAFETY: see above.
    unsafe {
        if query.is_null() {
            return;
        }
        let q = &mut *query;
        if !q.jointree.is_null() {
            in_from_expr(q, q.jointree, max_id);
        }
        for rte in PgList::<pg_sys::RangeTblEntry>::from_pg(q.rtable).iter_ptr() {
            if (*rte).rtekind == pg_sys::RTEKind::RTE_SUBQUERY {
                add_id_ranges((*rte).subquery, max_id);
            }
        }
        for cte in PgList::<pg_sys::CommonTableExpr>::from_pg(q.cteList).iter_ptr() {
            let inner = (*cte).ctequery;
            if is_a(inner, pg_sys::NodeTag::T_Query) {
                add_id_ranges(inner.cast(), max_id);
            }
        }
    }
}

/// # Safety
/// `from` belongs to `query`, as `add_id_ranges` requires.
unsafe fn in_from_expr(query: &pg_sys::Query, from: *mut pg_sys::FromExpr, max_id: i64) {
    // SAFETY: see above.
    unsafe {
        (*from).quals = with_id_ranges(query, (*from).quals, max_id);
        for item in PgList::<pg_sys::Node>::from_pg((*from).fromlist).iter_ptr() {
            in_join_tree(query, item, max_id);
        }
    }
}

/// # Safety
/// `node` is a join tree node of `query`, as `add_id_ranges` requires.
unsafe fn in_join_tree(query: &pg_sys::Query, node: *mut pg_sys::Node, max_id: i64) {
    // SAFETY: see above.
    unsafe {
        if is_a(node, pg_sys::NodeTag::T_FromExpr) {
            in_from_expr(query, node.cast(), max_id);
        } else if is_a(node, pg_sys::NodeTag::T_JoinExpr) {
            let join = node.cast::<pg_sys::JoinExpr>();
            // An ON clause with an equivalent condition in place of another selects the same
            // pairs, for outer joins too; but a FULL JOIN needs conditions it can merge or hash
            // (`=`), which a range is not: there the comparison stays as written ("FULL JOIN is
            // only supported with merge-joinable or hash-joinable join conditions" otherwise),
            // and an id range could not reach an index there anyway.
            if mutant!(planner_full_join, { (*join).jointype != pg_sys::JoinType::JOIN_FULL }, {
                true
            }) {
                (*join).quals = with_id_ranges(query, (*join).quals, max_id);
            }
            in_join_tree(query, (*join).larg, max_id);
            in_join_tree(query, (*join).rarg, max_id);
        }
    }
}

/// The conditions, with each top-level comparison of `snowflake_timestamp` replaced by (or,
/// where the table needs it, joined by) its id range. A column's ranges share their guards:
/// `id >= 0` only where none of its comparisons gives a lower bound, and likewise the largest
/// id above.
///
/// # Safety
/// `quals` is null or a condition of `query`.
unsafe fn with_id_ranges(
    query: &pg_sys::Query,
    quals: *mut pg_sys::Node,
    max_id: i64,
) -> *mut pg_sys::Node {
    // SAFETY: see above.
    unsafe {
        let mut kept = PgList::<pg_sys::Node>::new();
        let mut ranges: Vec<IdRange> = Vec::new();
        for clause in conjuncts(quals) {
            match id_range(query, clause, max_id) {
                None => kept.push(clause),
                Some(range) => {
                    if range.keep {
                        kept.push(clause);
                    }
                    ranges.push(range);
                }
            }
        }
        if ranges.is_empty() {
            return quals;
        }
        for (i, range) in ranges.iter().enumerate() {
            let same = |r: &&IdRange| r.column_key == range.column_key;
            let first = ranges.iter().position(|r| r.column_key == range.column_key) == Some(i);
            for &bound in range.lower.iter().chain(range.upper.iter()) {
                kept.push(bound);
            }
            if first && !ranges.iter().filter(same).any(|r| r.lower.is_some()) {
                kept.push(range.lower_guard);
            }
            if first && !ranges.iter().filter(same).any(|r| r.upper.is_some()) {
                if let Some(guard) = range.upper_guard {
                    kept.push(guard);
                }
            }
        }
        pg_sys::make_andclause(kept.into_pg()).cast()
    }
}

/// The top-level AND-ed conditions (not yet flattened by the planner).
///
/// # Safety
/// `node` is null or a valid expression.
unsafe fn conjuncts(node: *mut pg_sys::Node) -> Vec<*mut pg_sys::Node> {
    // SAFETY: see above.
    unsafe {
        if node.is_null() {
            return vec![];
        }
        if is_a(node, pg_sys::NodeTag::T_BoolExpr) {
            let b = node.cast::<pg_sys::BoolExpr>();
            if (*b).boolop == pg_sys::BoolExprType::AND_EXPR {
                return PgList::<pg_sys::Node>::from_pg((*b).args)
                    .iter_ptr()
                    .flat_map(|arg| conjuncts(arg))
                    .collect();
            }
        }
        vec![node]
    }
}

/// What a comparison of `snowflake_timestamp` turns into: conditions on the id equivalent to
/// it for every id the layout holds, and false for the others.
struct IdRange {
    /// The column, as (range table index, attribute number).
    column_key: (i32, i16),
    /// `id >= snowflake_id_bound(value, ...)`, at least 0, or `None` for `<` and `<=`.
    lower: Option<*mut pg_sys::Node>,
    /// `id <= snowflake_id_bound(value, ...)`, at most the largest id, or `None` for `>`, `>=`.
    upper: Option<*mut pg_sys::Node>,
    /// `id >= 0`, for when no comparison of the column gives a lower bound.
    lower_guard: *mut pg_sys::Node,
    /// `id <= largest id`, for when none gives an upper bound (`None`: every bigint that is
    /// not negative is an id of the layout).
    upper_guard: Option<*mut pg_sys::Node>,
    /// Whether the comparison stays too (see the module comment).
    keep: bool,
}

/// For `snowflake_timestamp(column) op value` (or `value op snowflake_timestamp(column)`), the
/// equivalent conditions on the column; `None` for any other condition.
///
/// # Safety
/// `clause` is a condition of `query`.
unsafe fn id_range(
    query: &pg_sys::Query,
    clause: *mut pg_sys::Node,
    max_id: i64,
) -> Option<IdRange> {
    // SAFETY: see above; every node is read as the type its tag says.
    unsafe {
        if !is_a(clause, pg_sys::NodeTag::T_OpExpr) {
            return None;
        }
        let op = &*clause.cast::<pg_sys::OpExpr>();
        let args = PgList::<pg_sys::Node>::from_pg(op.args);
        if args.len() != 2 {
            return None;
        }
        let strategy = match pg_sys::get_opcode(op.opno).to_u32() {
            pg_sys::F_TIMESTAMPTZ_LT => LESS,
            pg_sys::F_TIMESTAMPTZ_LE => LESS_EQUAL,
            pg_sys::F_TIMESTAMPTZ_EQ => EQUAL,
            pg_sys::F_TIMESTAMPTZ_GE => GREATER_EQUAL,
            pg_sys::F_TIMESTAMPTZ_GT => GREATER,
            _ => return None,
        };
        let (left, right) = (args.get_ptr(0)?, args.get_ptr(1)?);
        let ((column, timestamp), value, strategy) = match timestamp_call(left) {
            Some(call) => (call, right, strategy),
            // value op ts(id) is ts(id) commuted-op value
            None => (timestamp_call(right)?, left, 6 - strategy),
        };
        // The value goes into one or two bounds, evaluated apart from the comparison: it must
        // give the same answer each time, and one.
        mutant!(
            planner_volatile,
            {
                if pg_sys::contain_volatile_functions(value)
                    || pg_sys::expression_returns_set(value)
                {
                    return None;
                }
            },
            {}
        );
        // `=` puts the value into two bounds, each evaluated on its own: a sub-select could give
        // two answers (`TABLESAMPLE BERNOULLI`: between 0 and 61 rows where the query as written
        // gave 1). A comparison gives one bound, evaluated once, as the comparison's was.
        if mutant!(planner_sublink, { strategy == EQUAL && pg_sys::contain_subplans(value) }, {
            false
        }) {
            return None;
        }
        let relation = table_of(query, column)?;
        let bound_function = bound_function(timestamp)?;
        // A role that may not call snowflake_id_bound (an administrator revoked it from PUBLIC)
        // gets the comparison as written, not a "permission denied" for a function its query
        // never names.
        if mutant!(planner_execute, { !may_execute(bound_function) }, { false }) {
            return None;
        }
        let keep = mutant!(planner_keep, { needs_the_comparison(relation, timestamp) }, {
            let _ = needs_the_comparison;
            false
        });
        let bound = |strategy: i32| -> *mut pg_sys::Node {
            let mut bound_args = PgList::<pg_sys::Node>::new();
            bound_args.push(pg_sys::copyObjectImpl(value.cast()).cast());
            bound_args.push(int_const(pg_sys::INT4OID, 4, pg_sys::Datum::from(strategy)));
            pg_sys::makeFuncExpr(
                bound_function,
                pg_sys::INT8OID,
                bound_args.into_pg(),
                pg_sys::InvalidOid,
                pg_sys::InvalidOid,
                pg_sys::CoercionForm::COERCE_EXPLICIT_CALL,
            )
            .cast()
        };
        let compare = |operator: u32, other: *mut pg_sys::Node| -> *mut pg_sys::Node {
            pg_sys::make_opclause(
                pg_sys::Oid::from(operator),
                pg_sys::BOOLOID,
                false,
                pg_sys::copyObjectImpl(column.cast()).cast(),
                other.cast(),
                pg_sys::InvalidOid,
                pg_sys::InvalidOid,
            )
            .cast()
        };
        let id = |value: i64| int_const(pg_sys::INT8OID, 8, pg_sys::Datum::from(value));
        // The bounds stay within the layout's ids: a lower one is at least 0, an upper one at
        // most the largest id (snowflake_id_bound clamps them), and the guards close the side a
        // comparison leaves open.
        let lower = match strategy {
            LESS | LESS_EQUAL => None,
            GREATER => Some(compare(INT8_GE, bound(GREATER))),
            _ => Some(compare(INT8_GE, bound(GREATER_EQUAL))),
        };
        let upper = match strategy {
            GREATER | GREATER_EQUAL => None,
            LESS => Some(compare(INT8_LE, bound(LESS))),
            _ => Some(compare(INT8_LE, bound(LESS_EQUAL))),
        };
        let var = &*column.cast::<pg_sys::Var>();
        Some(IdRange {
            column_key: (var.varno, var.varattno),
            lower,
            upper,
            lower_guard: compare(INT8_GE, id(mutant!(planner_guards, { 0 }, { i64::MIN }))),
            upper_guard: (mutant!(planner_guards, { max_id < i64::MAX }, { max_id < 0 }))
                .then(|| compare(INT8_LE, id(max_id))),
            keep,
        })
    }
}

/// A constant of a by-value integer type.
///
/// # Safety
/// `type_oid` and `len` describe a by-value integer type, whose value `datum` holds.
unsafe fn int_const(type_oid: pg_sys::Oid, len: i32, datum: pg_sys::Datum) -> *mut pg_sys::Node {
    // SAFETY: see above.
    unsafe { pg_sys::makeConst(type_oid, -1, pg_sys::InvalidOid, len, datum, false, true).cast() }
}

/// `(argument, function)` if `node` is a call of this library's `snowflake_timestamp`.
///
/// # Safety
/// `node` is null or a valid expression.
unsafe fn timestamp_call(node: *mut pg_sys::Node) -> Option<(*mut pg_sys::Node, pg_sys::Oid)> {
    // SAFETY: see above.
    unsafe {
        if !is_a(node, pg_sys::NodeTag::T_FuncExpr) {
            return None;
        }
        let call = &*node.cast::<pg_sys::FuncExpr>();
        if !is_our_timestamp(call.funcid) {
            return None;
        }
        let arg = PgList::<pg_sys::Node>::from_pg(call.args).get_ptr(0)?;
        Some((arg, call.funcid))
    }
}

/// The table whose plain column `node` is (in this query, not an outer one).
///
/// # Safety
/// `node` is an expression of `query`.
unsafe fn table_of(query: &pg_sys::Query, node: *mut pg_sys::Node) -> Option<pg_sys::Oid> {
    // SAFETY: see above; a Var's varno indexes the query's range table (from 1).
    unsafe {
        if !is_a(node, pg_sys::NodeTag::T_Var) {
            return mutant!(planner_volatile, { None }, { Some(pg_sys::InvalidOid) });
        }
        let var = &*node.cast::<pg_sys::Var>();
        if var.varlevelsup != 0 || var.varattno <= 0 || var.vartype != pg_sys::INT8OID {
            return None;
        }
        let rtable = PgList::<pg_sys::RangeTblEntry>::from_pg(query.rtable);
        let rte = rtable.get_ptr(usize::try_from(var.varno).ok()?.checked_sub(1)?)?;
        ((*rte).rtekind == pg_sys::RTEKind::RTE_RELATION).then_some((*rte).relid)
    }
}

/// Whether the table needs the comparison itself: it is partitioned (the partition key may be
/// an expression on `snowflake_timestamp`, which pruning matches), or one of its indexes is on
/// an expression that calls it. The parser holds a lock on the table, so its relation cache
/// entry can be read without taking another.
///
/// # Safety
/// `relid` is a table of the query being planned.
unsafe fn needs_the_comparison(relid: pg_sys::Oid, timestamp: pg_sys::Oid) -> bool {
    // SAFETY: see above; every relation opened is closed before return.
    unsafe {
        let rel = pg_sys::RelationIdGetRelation(relid);
        if rel.is_null() {
            return true;
        }
        let partitioned = (*(*rel).rd_rel).relkind == pg_sys::RELKIND_PARTITIONED_TABLE as i8;
        let mut indexed = false;
        if !partitioned {
            let indexes = PgList::<pg_sys::Oid>::from_pg(pg_sys::RelationGetIndexList(rel));
            for index in indexes.iter_oid() {
                let index_rel = pg_sys::RelationIdGetRelation(index);
                if index_rel.is_null() {
                    continue;
                }
                // An index on an expression that calls it, or one whose predicate does (a
                // partial index `WHERE snowflake_timestamp(id) > ...` is matched against the
                // comparison; without it, a lookup of one value became a range scan).
                let exprs = pg_sys::RelationGetIndexExpressions(index_rel);
                indexed |= !exprs.is_null() && calls(exprs.cast(), timestamp);
                let predicate = pg_sys::RelationGetIndexPredicate(index_rel);
                mutant!(
                    planner_partial_index,
                    {
                        indexed |= !predicate.is_null() && calls(predicate.cast(), timestamp);
                    },
                    {
                        let _ = predicate;
                    }
                );
                pg_sys::RelationClose(index_rel);
            }
        }
        pg_sys::RelationClose(rel);
        partitioned || indexed
    }
}

/// Whether the current user may execute `function`.
///
/// # Safety
/// Reads the system caches: call while a transaction is in progress (as in planning).
unsafe fn may_execute(function: pg_sys::Oid) -> bool {
    // SAFETY: an ACL check of a function oid for the current user.
    unsafe {
        let user = pg_sys::GetUserId();
        #[cfg(feature = "pg15")]
        let result = pg_sys::pg_proc_aclcheck(function, user, pg_sys::ACL_EXECUTE as _);
        #[cfg(not(feature = "pg15"))]
        let result = pg_sys::object_aclcheck(
            pg_sys::ProcedureRelationId,
            function,
            user,
            pg_sys::ACL_EXECUTE as _,
        );
        result == pg_sys::AclResult::ACLCHECK_OK
    }
}

/// Whether an expression calls `function` anywhere.
///
/// # Safety
/// `node` is a valid expression tree (or list of them).
unsafe fn calls(node: *mut pg_sys::Node, function: pg_sys::Oid) -> bool {
    /// # Safety
    /// Called by `expression_tree_walker` with nodes of the tree and the context given to it.
    #[pg_guard]
    unsafe extern "C-unwind" fn walker(
        node: *mut pg_sys::Node,
        context: *mut std::ffi::c_void,
    ) -> bool {
        // SAFETY: see above; the context is the function's oid.
        unsafe {
            if node.is_null() {
                return false;
            }
            let function = *context.cast::<pg_sys::Oid>();
            if is_a(node, pg_sys::NodeTag::T_FuncExpr)
                && (*node.cast::<pg_sys::FuncExpr>()).funcid == function
            {
                return true;
            }
            pg_sys::expression_tree_walker(node, Some(walker), context)
        }
    }
    let mut function = function;
    // SAFETY: see above.
    unsafe { walker(node, (&raw mut function).cast()) }
}

/// Whether `funcid` is this library's `snowflake_timestamp`: a C function whose symbol is its
/// wrapper, whatever its schema (PostgreSQL 15 has no cheap way from a function to its
/// extension). Two syscache lookups, made only for calls of a function of that name.
///
/// # Safety
/// Reads the system caches: call while a transaction is in progress (as in planning).
unsafe fn is_our_timestamp(funcid: pg_sys::Oid) -> bool {
    // SAFETY: syscache lookups of a function oid; the tuple is released before return.
    unsafe {
        let name = pg_sys::get_func_name(funcid);
        if name.is_null() || CStr::from_ptr(name) != c"snowflake_timestamp" {
            return false;
        }
        let cache = pg_sys::SysCacheIdentifier::PROCOID as std::ffi::c_int;
        let tuple = pg_sys::SearchSysCache1(cache, pg_sys::Datum::from(funcid));
        if tuple.is_null() {
            return false;
        }
        let form = &*pg_sys::heap_tuple_get_struct::<pg_sys::FormData_pg_proc>(tuple);
        let mut null = false;
        let src = pg_sys::SysCacheGetAttr(
            cache,
            tuple,
            pg_sys::Anum_pg_proc_prosrc as pg_sys::AttrNumber,
            &mut null,
        );
        let ours = !null
            && form.prolang == pg_sys::Oid::from(C_LANGUAGE)
            && CStr::from_ptr(pg_sys::text_to_cstring(src.cast_mut_ptr()))
                == c"snowflake_timestamp_wrapper";
        pg_sys::ReleaseSysCache(tuple);
        ours
    }
}

/// `snowflake_id_bound(timestamptz, integer)` in the schema of the `snowflake_timestamp` that
/// was found (an extension keeps its functions in one schema), looked up in the system cache by
/// name, argument types and schema: no search_path, and no check of the current user's rights
/// (calling it needs EXECUTE, which PUBLIC has). `None` for a 0.1.0 install, which has neither.
///
/// # Safety
/// As `is_our_timestamp`.
unsafe fn bound_function(timestamp: pg_sys::Oid) -> Option<pg_sys::Oid> {
    // SAFETY: a syscache lookup with keys built here.
    unsafe {
        let namespace = mutant!(planner_acl, { pg_sys::get_func_namespace(timestamp) }, {
            pg_sys::LookupExplicitNamespace(
                pg_sys::get_namespace_name(pg_sys::get_func_namespace(timestamp)),
                false,
            )
        });
        let types = [pg_sys::TIMESTAMPTZOID, pg_sys::INT4OID];
        let argtypes = pg_sys::buildoidvector(types.as_ptr(), types.len() as i32);
        let bound = pg_sys::GetSysCacheOid(
            pg_sys::SysCacheIdentifier::PROCNAMEARGSNSP as std::ffi::c_int,
            pg_sys::Anum_pg_proc_oid as pg_sys::AttrNumber,
            pg_sys::Datum::from(c"snowflake_id_bound".as_ptr()),
            pg_sys::Datum::from(argtypes),
            pg_sys::Datum::from(namespace),
            pg_sys::Datum::from(0),
        );
        (bound != pg_sys::InvalidOid).then_some(bound)
    }
}

/// # Safety
/// `node` is null or points to a node.
unsafe fn is_a(node: *mut pg_sys::Node, tag: pg_sys::NodeTag) -> bool {
    // SAFETY: see above.
    !node.is_null() && unsafe { (*node).type_ } == tag
}

/// The query for a relation's largest id found another relation or a view under its name.
#[cold]
#[track_caller]
fn query_redirected() -> ! {
    errors::report(
        Code::ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE,
        "the table's name leads to another relation",
        "Find out who renames the schema, then run snowflake_adopt() again.",
    )
    .detail(
        "A schema was renamed while snowflake_adopt() ran; nothing of what the name now leads to \
         was run, and nothing was changed.",
    )
    .raise()
}
