//! Time ranges written as people think, `WHERE snowflake_timestamp(id) >= a AND
//! snowflake_timestamp(id) < b`, answered by the primary key index on `id`.
//!
//! Ids are ordered by time, so every comparison of `snowflake_timestamp(id)` with a value is a
//! range of `id`: the ids of time unit `u` are exactly `u << (worker + sequence bits)` up to the
//! next unit's first id, in every layout. Before the planner runs, this hook finds such
//! comparisons among the AND-ed conditions of each `WHERE` and `JOIN ... ON` and replaces each
//! with the equivalent condition on the id: `snowflake_timestamp(id) >= a` becomes
//! `id >= snowflake_id_bound(a, 4)`, which the planner folds to a constant and matches to the
//! index like any `id >= 123`. Nothing is left to re-check per row, so the query costs what the
//! hand-written id range costs. The one difference: an id that the layout cannot hold (a
//! negative one) is compared as a number, where `snowflake_timestamp` would have raised an
//! error.
//!
//! Why a planner hook and not a `SUPPORT` function: PostgreSQL asks a support function for an
//! index condition (`SupportRequestIndexCondition`) only when one side of the comparison *is*
//! the indexed column, and then only the support function of the operator's own function
//! (indxpath.c, `match_opclause_to_indexcol`), here the built-in `timestamptz_ge`. A function
//! of the column on one side is never offered. TimescaleDB rewrites comparisons of its
//! `time_bucket(...)` the same way, for the same reason.
//!
//! What it does not see: comparisons inside OR, NOT or CASE, in a sub-select of a WHERE
//! (`EXISTS (...)`), and with a volatile value (`random()`, `clock_timestamp()`). Those run as
//! written.

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
    // SAFETY: as in `plan`.
    unsafe { add_id_ranges(parse) };
}

/// pg_language's `c`.
const C_LANGUAGE: u32 = 13;

/// Whether `funcid` is this library's `snowflake_timestamp`: a C function whose symbol is its
/// wrapper, whatever its schema (PostgreSQL 15 has no cheap way from a function to its
/// extension). Two syscache lookups, made only for calls of a function of that name.
unsafe fn is_our_timestamp(funcid: pg_sys::Oid) -> bool {
    // SAFETY: syscache lookups of a valid function oid; the tuple is released before return.
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

/// `snowflake_id_bound`, from the schema of the `snowflake_timestamp` that was found (an
/// extension keeps its functions in one schema); `None` for a 0.1.0 install that has neither.
unsafe fn bound_function(timestamp: pg_sys::Oid) -> Option<pg_sys::Oid> {
    // SAFETY: catalog lookups of a valid function and its schema.
    unsafe {
        let schema = pg_sys::get_namespace_name(pg_sys::get_func_namespace(timestamp));
        if schema.is_null() {
            return None;
        }
        let mut name = PgList::<pg_sys::Node>::new();
        name.push(pg_sys::makeString(schema).cast());
        name.push(pg_sys::makeString(c"snowflake_id_bound".as_ptr().cast_mut()).cast());
        let bound = pg_sys::LookupFuncName(
            name.into_pg(),
            2,
            [pg_sys::TIMESTAMPTZOID, pg_sys::INT4OID].as_ptr(),
            true,
        );
        (bound != pg_sys::InvalidOid).then_some(bound)
    }
}

/// Adds the implied id ranges in a query, its sub-queries in FROM and its CTEs.
unsafe fn add_id_ranges(query: *mut pg_sys::Query) {
    // SAFETY: a valid Query from the parser or rewriter; its nodes are ours to extend.
    unsafe {
        if query.is_null() {
            return;
        }
        let q = &mut *query;
        if !q.jointree.is_null() {
            in_from_expr(q.jointree);
        }
        for rte in PgList::<pg_sys::RangeTblEntry>::from_pg(q.rtable).iter_ptr() {
            if (*rte).rtekind == pg_sys::RTEKind::RTE_SUBQUERY {
                add_id_ranges((*rte).subquery);
            }
        }
        for cte in PgList::<pg_sys::CommonTableExpr>::from_pg(q.cteList).iter_ptr() {
            let inner = (*cte).ctequery;
            if is_a(inner, pg_sys::NodeTag::T_Query) {
                add_id_ranges(inner.cast());
            }
        }
    }
}

unsafe fn in_from_expr(from: *mut pg_sys::FromExpr) {
    // SAFETY: as in `add_id_ranges`.
    unsafe {
        (*from).quals = with_id_ranges((*from).quals);
        for item in PgList::<pg_sys::Node>::from_pg((*from).fromlist).iter_ptr() {
            in_join_tree(item);
        }
    }
}

unsafe fn in_join_tree(node: *mut pg_sys::Node) {
    // SAFETY: as in `add_id_ranges`.
    unsafe {
        if is_a(node, pg_sys::NodeTag::T_FromExpr) {
            in_from_expr(node.cast());
        } else if is_a(node, pg_sys::NodeTag::T_JoinExpr) {
            let join = node.cast::<pg_sys::JoinExpr>();
            // Adding a condition implied by the ON clause to that same ON clause changes
            // nothing, for outer joins too.
            (*join).quals = with_id_ranges((*join).quals);
            in_join_tree((*join).larg);
            in_join_tree((*join).rarg);
        }
    }
}

/// The conditions, with each top-level comparison of `snowflake_timestamp` replaced by its id
/// range.
unsafe fn with_id_ranges(quals: *mut pg_sys::Node) -> *mut pg_sys::Node {
    // SAFETY: as in `add_id_ranges`.
    unsafe {
        let mut all = PgList::<pg_sys::Node>::new();
        let mut replaced = false;
        for clause in conjuncts(quals) {
            if !id_range(clause, &mut all) {
                all.push(clause);
            } else {
                replaced = true;
            }
        }
        if !replaced {
            return quals;
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

/// For `snowflake_timestamp(x) op value` (or `value op snowflake_timestamp(x)`), pushes the
/// equivalent conditions on `x` and returns true.
unsafe fn id_range(clause: *mut pg_sys::Node, added: &mut PgList<pg_sys::Node>) -> bool {
    // SAFETY: as in `add_id_ranges`.
    unsafe {
        if !is_a(clause, pg_sys::NodeTag::T_OpExpr) {
            return false;
        }
        let op = &*clause.cast::<pg_sys::OpExpr>();
        let args = PgList::<pg_sys::Node>::from_pg(op.args);
        if args.len() != 2 {
            return false;
        }
        let strategy = match pg_sys::get_opcode(op.opno).to_u32() {
            pg_sys::F_TIMESTAMPTZ_LT => LESS,
            pg_sys::F_TIMESTAMPTZ_LE => LESS_EQUAL,
            pg_sys::F_TIMESTAMPTZ_EQ => EQUAL,
            pg_sys::F_TIMESTAMPTZ_GE => GREATER_EQUAL,
            pg_sys::F_TIMESTAMPTZ_GT => GREATER,
            _ => return false,
        };
        let (left, right) = (args.get_ptr(0).unwrap(), args.get_ptr(1).unwrap());
        let ((id, timestamp), value, strategy) = if let Some(call) = timestamp_call(left) {
            (call, right, strategy)
        } else if let Some(call) = timestamp_call(right) {
            (call, left, 6 - strategy) // value op ts(id) is ts(id) commuted-op value
        } else {
            return false;
        };
        if pg_sys::contain_volatile_functions(value) {
            return false; // evaluated twice for `=`, it could differ
        }
        let Some(bound_function) = bound_function(timestamp) else {
            return false;
        };
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
                bound_function,
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
        true
    }
}

/// `(x, function)` if `node` is a call of this library's `snowflake_timestamp(x)`.
unsafe fn timestamp_call(node: *mut pg_sys::Node) -> Option<(*mut pg_sys::Node, pg_sys::Oid)> {
    // SAFETY: as in `add_id_ranges`.
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

unsafe fn is_a(node: *mut pg_sys::Node, tag: pg_sys::NodeTag) -> bool {
    // SAFETY: a valid node pointer or null.
    !node.is_null() && unsafe { (*node).type_ } == tag
}
