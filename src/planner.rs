//! Time ranges written as people think, `WHERE snowflake_timestamp(id) >= a AND
//! snowflake_timestamp(id) < b`, answered by the primary key index on `id`.
//!
//! Ids are ordered by time, so every comparison of `snowflake_timestamp(id)` with a value implies
//! a range of `id`. Before the planner runs, this hook finds such comparisons among the
//! AND-ed conditions of each `WHERE` and `JOIN ... ON` and adds the implied condition on the id:
//! `snowflake_timestamp(id) >= a` gains `id >= snowflake_id_bound(a, 4)`, which the planner folds
//! to a constant and matches to the index like any `id >= 123`. The original condition stays
//! (as a filter, checked on the few rows the range returns), so the rows are exactly those it
//! selects: an added condition only ever narrows what the index reads.
//!
//! Why a planner hook and not a `SUPPORT` function: PostgreSQL asks a support function for an
//! index condition (`SupportRequestIndexCondition`) only when one side of the comparison *is*
//! the indexed column, and then only the support function of the operator's own function
//! (indxpath.c, `match_opclause_to_indexcol`), here the built-in `timestamptz_ge`. A function
//! of the column on one side is never offered. TimescaleDB rewrites comparisons of its
//! `time_bucket(...)` the same way, for the same reason.
//!
//! What it does not see: comparisons inside OR, NOT or CASE, in a sub-select of a WHERE
//! (`EXISTS (...)`), and with a volatile value (`random()`, `clock_timestamp()`). Those plan as
//! before.

use pgrx::pg_sys;
use pgrx::prelude::*;
use pgrx::PgList;
use std::ffi::CStr;

/// PostgreSQL's B-tree strategy numbers: `<`, `<=`, `=`, `>=`, `>`.
const LESS: i32 = 1;
const LESS_EQUAL: i32 = 2;
const EQUAL: i32 = 3;
const GREATER_EQUAL: i32 = 4;
const GREATER: i32 = 5;

/// `int8 <= int8` and `int8 >= int8` (pg_operator.dat).
const INT8_LE: u32 = 414;
const INT8_GE: u32 = 415;

static mut PREVIOUS: pg_sys::planner_hook_type = None;

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
unsafe extern "C-unwind" fn plan(
    parse: *mut pg_sys::Query,
    query_string: *const std::ffi::c_char,
    cursor_options: std::ffi::c_int,
    bound_params: pg_sys::ParamListInfo,
) -> *mut pg_sys::PlannedStmt {
    // SAFETY: PostgreSQL passes the query it is about to plan, which the planner may change;
    // the previous hook and standard_planner are PostgreSQL's own C functions.
    unsafe {
        rewrite(parse);
        match PREVIOUS {
            Some(previous) => previous(parse, query_string, cursor_options, bound_params),
            None => standard_planner(parse, query_string, cursor_options, bound_params),
        }
    }
}

unsafe extern "C-unwind" {
    /// PostgreSQL's planner, called directly rather than through pgrx's error-catching wrapper.
    fn standard_planner(
        parse: *mut pg_sys::Query,
        query_string: *const std::ffi::c_char,
        cursor_options: std::ffi::c_int,
        bound_params: pg_sys::ParamListInfo,
    ) -> *mut pg_sys::PlannedStmt;
}

#[pg_guard]
unsafe extern "C-unwind" fn rewrite(parse: *mut pg_sys::Query) {
    let mut functions = None;
    // SAFETY: as in `plan`.
    unsafe { add_id_ranges(parse, &mut functions) };
}

/// The functions of the extension in this database: looked up only once a query holds a
/// comparison of a function named `snowflake_timestamp`, so other queries pay nothing but a
/// walk over their top-level conditions.
#[derive(Clone, Copy)]
struct Functions {
    timestamp: pg_sys::Oid,
    bound: pg_sys::Oid,
}

/// `None` inside: looked up and not there (the extension is not created, or is 0.1.0).
type Lookup = Option<Option<Functions>>;

unsafe fn functions(lookup: &mut Lookup) -> Option<Functions> {
    *lookup.get_or_insert_with(|| unsafe {
        let ext = pg_sys::get_extension_oid(c"pg_snowflake".as_ptr(), true);
        if ext == pg_sys::InvalidOid {
            return None;
        }
        let schema = pg_sys::get_namespace_name(pg_sys::get_extension_schema(ext));
        if schema.is_null() {
            return None;
        }
        let name = |f: &CStr| {
            let mut list = PgList::<pg_sys::Node>::new();
            list.push(pg_sys::makeString(schema).cast());
            list.push(pg_sys::makeString(f.as_ptr().cast_mut()).cast());
            list.into_pg()
        };
        let timestamp = pg_sys::LookupFuncName(
            name(c"snowflake_timestamp"),
            1,
            [pg_sys::INT8OID].as_ptr(),
            true,
        );
        let bound = pg_sys::LookupFuncName(
            name(c"snowflake_id_bound"),
            2,
            [pg_sys::TIMESTAMPTZOID, pg_sys::INT4OID].as_ptr(),
            true,
        );
        (timestamp != pg_sys::InvalidOid && bound != pg_sys::InvalidOid)
            .then_some(Functions { timestamp, bound })
    })
}

/// Adds the implied id ranges in a query, its sub-queries in FROM and its CTEs.
unsafe fn add_id_ranges(query: *mut pg_sys::Query, lookup: &mut Lookup) {
    // SAFETY: a valid Query from the parser or rewriter; its nodes are ours to extend.
    unsafe {
        if query.is_null() {
            return;
        }
        let q = &mut *query;
        if !q.jointree.is_null() {
            in_from_expr(q.jointree, lookup);
        }
        for rte in PgList::<pg_sys::RangeTblEntry>::from_pg(q.rtable).iter_ptr() {
            if (*rte).rtekind == pg_sys::RTEKind::RTE_SUBQUERY {
                add_id_ranges((*rte).subquery, lookup);
            }
        }
        for cte in PgList::<pg_sys::CommonTableExpr>::from_pg(q.cteList).iter_ptr() {
            let inner = (*cte).ctequery;
            if is_a(inner, pg_sys::NodeTag::T_Query) {
                add_id_ranges(inner.cast(), lookup);
            }
        }
    }
}

unsafe fn in_from_expr(from: *mut pg_sys::FromExpr, lookup: &mut Lookup) {
    // SAFETY: as in `add_id_ranges`.
    unsafe {
        (*from).quals = with_id_ranges((*from).quals, lookup);
        for item in PgList::<pg_sys::Node>::from_pg((*from).fromlist).iter_ptr() {
            in_join_tree(item, lookup);
        }
    }
}

unsafe fn in_join_tree(node: *mut pg_sys::Node, lookup: &mut Lookup) {
    // SAFETY: as in `add_id_ranges`.
    unsafe {
        if is_a(node, pg_sys::NodeTag::T_FromExpr) {
            in_from_expr(node.cast(), lookup);
        } else if is_a(node, pg_sys::NodeTag::T_JoinExpr) {
            let join = node.cast::<pg_sys::JoinExpr>();
            // Adding a condition implied by the ON clause to that same ON clause changes
            // nothing, for outer joins too.
            (*join).quals = with_id_ranges((*join).quals, lookup);
            in_join_tree((*join).larg, lookup);
            in_join_tree((*join).rarg, lookup);
        }
    }
}

/// The conditions, AND the id ranges their top-level comparisons imply.
unsafe fn with_id_ranges(quals: *mut pg_sys::Node, lookup: &mut Lookup) -> *mut pg_sys::Node {
    // SAFETY: as in `add_id_ranges`.
    unsafe {
        let mut added = PgList::<pg_sys::Node>::new();
        for clause in conjuncts(quals) {
            implied_ranges(clause, lookup, &mut added);
        }
        if added.is_empty() {
            return quals;
        }
        let mut all = PgList::<pg_sys::Node>::new();
        all.push(quals);
        for clause in added.iter_ptr() {
            all.push(clause);
        }
        pg_sys::make_andclause(all.into_pg()).cast()
    }
}

/// The top-level AND-ed conditions (not yet flattened by the planner).
unsafe fn conjuncts(node: *mut pg_sys::Node) -> Vec<*mut pg_sys::Node> {
    // SAFETY: as in `add_id_ranges`.
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

/// For `snowflake_timestamp(x) op value` (or `value op snowflake_timestamp(x)`), the conditions
/// on `x` it implies.
unsafe fn implied_ranges(
    clause: *mut pg_sys::Node,
    lookup: &mut Lookup,
    added: &mut PgList<pg_sys::Node>,
) {
    // SAFETY: as in `add_id_ranges`.
    unsafe {
        if !is_a(clause, pg_sys::NodeTag::T_OpExpr) {
            return;
        }
        let op = &*clause.cast::<pg_sys::OpExpr>();
        let args = PgList::<pg_sys::Node>::from_pg(op.args);
        if args.len() != 2 {
            return;
        }
        let strategy = match pg_sys::get_opcode(op.opno).to_u32() {
            pg_sys::F_TIMESTAMPTZ_LT => LESS,
            pg_sys::F_TIMESTAMPTZ_LE => LESS_EQUAL,
            pg_sys::F_TIMESTAMPTZ_EQ => EQUAL,
            pg_sys::F_TIMESTAMPTZ_GE => GREATER_EQUAL,
            pg_sys::F_TIMESTAMPTZ_GT => GREATER,
            _ => return,
        };
        let (left, right) = (args.get_ptr(0).unwrap(), args.get_ptr(1).unwrap());
        let (id, value, strategy) = if let Some(id) = timestamp_argument(left, lookup) {
            (id, right, strategy)
        } else if let Some(id) = timestamp_argument(right, lookup) {
            (id, left, 6 - strategy) // value op ts(id) is ts(id) commuted-op value
        } else {
            return;
        };
        if pg_sys::contain_volatile_functions(value) {
            return; // evaluated twice, it could differ: the range would not be implied
        }
        let functions = functions(lookup).expect("checked by timestamp_argument");
        let mut range = |operator: u32, strategy: i32| {
            let mut bound_args = PgList::<pg_sys::Node>::new();
            bound_args.push(pg_sys::copyObjectImpl(value.cast()).cast());
            bound_args.push(
                pg_sys::makeConst(
                    pg_sys::INT4OID,
                    -1,
                    pg_sys::InvalidOid,
                    4,
                    pg_sys::Datum::from(strategy),
                    false,
                    true,
                )
                .cast(),
            );
            let bound = pg_sys::makeFuncExpr(
                functions.bound,
                pg_sys::INT8OID,
                bound_args.into_pg(),
                pg_sys::InvalidOid,
                pg_sys::InvalidOid,
                pg_sys::CoercionForm::COERCE_EXPLICIT_CALL,
            );
            added.push(
                pg_sys::make_opclause(
                    pg_sys::Oid::from(operator),
                    pg_sys::BOOLOID,
                    false,
                    pg_sys::copyObjectImpl(id.cast()).cast(),
                    bound.cast(),
                    pg_sys::InvalidOid,
                    pg_sys::InvalidOid,
                )
                .cast(),
            );
        };
        match strategy {
            LESS | LESS_EQUAL => range(INT8_LE, strategy),
            GREATER | GREATER_EQUAL => range(INT8_GE, strategy),
            _ => {
                range(INT8_GE, GREATER_EQUAL);
                range(INT8_LE, LESS_EQUAL);
            }
        }
    }
}

/// `x` if `node` is a call of this extension's `snowflake_timestamp(x)`.
unsafe fn timestamp_argument(
    node: *mut pg_sys::Node,
    lookup: &mut Lookup,
) -> Option<*mut pg_sys::Node> {
    // SAFETY: as in `add_id_ranges`.
    unsafe {
        if !is_a(node, pg_sys::NodeTag::T_FuncExpr) {
            return None;
        }
        let call = &*node.cast::<pg_sys::FuncExpr>();
        // The cheap test first: a syscache lookup of the name, before the extension's.
        let name = pg_sys::get_func_name(call.funcid);
        if name.is_null() || CStr::from_ptr(name) != c"snowflake_timestamp" {
            return None;
        }
        if functions(lookup)?.timestamp != call.funcid {
            return None;
        }
        PgList::<pg_sys::Node>::from_pg(call.args).get_ptr(0)
    }
}

unsafe fn is_a(node: *mut pg_sys::Node, tag: pg_sys::NodeTag) -> bool {
    // SAFETY: a valid node pointer or null.
    !node.is_null() && unsafe { (*node).type_ } == tag
}
