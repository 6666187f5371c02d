//! The worst-case cost of one evaluation of an expression (cel-go's `checker/cost.go`,
//! with Kubernetes' library costs), computed over cel-rust's AST from [`Shape`]s of the
//! variables.
//!
//! # Costs
//! Constants cost 0; identifiers and field selections 1; list literals 10, map literals
//! 30 and message literals 40 plus their elements; a call costs its arguments plus its
//! own work: 1 for constant-time functions, one unit per ten bytes for work that reads
//! strings or values (`+`, `==` and comparisons on strings and lists, `string()`,
//! `lowerAscii`, `split`, `join`, `replace`, …), one unit per item for work that walks a
//! list (`in`, `indexOf`, `min`, `sum`, …), `n·log n` for `sort`, `n²` for `distinct`,
//! `⌈len/4⌉·⌈pattern/4⌉` for `matches`, 350 000 for an authorizer `check()`.
//! `&&`/`||` cost both sides; `c ? a : b` costs `c` and the dearer branch; a
//! comprehension (`all`, `exists`, `map`, `filter`, …) costs its range plus, for every
//! item the range can hold, its condition and step.
//!
//! # Guarantees
//! - Monotone: larger shapes never give a smaller cost, so an estimate from a schema
//!   bounds the estimate from any value valid under it.
//! - Sound for cel-rust: every construct cel-rust evaluates in more than constant time is
//!   charged at least in proportion to that time (unknown functions are charged as a
//!   walk over their arguments).
//! - Saturating: an unbounded estimate is `u64::MAX`, never a wrapped number.

use cel::common::ast::{EntryExpr, Expr, IdedExpr, LiteralValue};

use super::shape::Shape;

/// What one authorizer check costs (upstream's library prices it as a remote call).
pub const AUTHZ_CHECK_COST: u64 = 350_000;

/// The bound assumed for an integer argument that is not a literal (`lists.range(n)`).
const UNKNOWN_INT: u64 = 1 << 40;

/// The namespaces of qualified function names.
const NAMESPACES: &[&str] = &["math", "strings", "lists", "optional", "base64"];

/// The cost of evaluating `e` once with variables of the given shapes (unknown variables
/// are [`Shape::Any`] of a whole request).
pub fn estimate(e: &IdedExpr, vars: &[(&str, Shape)]) -> u64 {
    let mut est = Estimator {
        scope: vars
            .iter()
            .map(|(n, s)| (n.to_string(), s.clone()))
            .collect(),
    };
    est.expr(e).0
}

fn add(a: u64, b: u64) -> u64 {
    a.saturating_add(b)
}

fn mul(a: u64, b: u64) -> u64 {
    a.saturating_mul(b)
}

/// One unit per ten bytes (cel-go's `StringTraversalCostFactor`), rounded up.
fn traversal(bytes: u64) -> u64 {
    bytes.div_ceil(10)
}

/// The cost of comparing two values of these shapes.
fn equality(a: &Shape, b: &Shape) -> u64 {
    match (a, b) {
        (Shape::Scalar, _) | (_, Shape::Scalar) => 1,
        _ => add(1, traversal(a.bytes().min(b.bytes()))),
    }
}

struct Estimator {
    scope: Vec<(String, Shape)>,
}

impl Estimator {
    fn lookup(&self, name: &str) -> Shape {
        self.scope
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map(|(_, s)| s.clone())
            .unwrap_or(Shape::Any(super::MAX_REQUEST_BYTES))
    }

    fn expr(&mut self, e: &IdedExpr) -> (u64, Shape) {
        match &e.expr {
            Expr::Unspecified => (0, Shape::Scalar),
            Expr::Literal(l) => (0, literal(l)),
            Expr::Ident(name) => (1, self.lookup(name)),
            Expr::Select(s) => {
                let (c, operand) = self.expr(&s.operand);
                let out = if s.test {
                    Shape::Scalar
                } else {
                    operand.field(&s.field)
                };
                (add(c, 1), out)
            }
            Expr::List(l) => {
                let mut cost = 10;
                let mut item: Option<Shape> = None;
                for x in &l.elements {
                    let (c, s) = self.expr(x);
                    cost = add(cost, c);
                    item = Some(item.map_or(s.clone(), |i| i.join(&s)));
                }
                (
                    cost,
                    Shape::list(l.elements.len() as u64, item.unwrap_or(Shape::Scalar)),
                )
            }
            Expr::Map(m) => self.entries(&m.entries, 30),
            Expr::Struct(s) => self.entries(&s.entries, 40),
            Expr::Call(c) => self.call(&c.func_name, c.target.as_deref(), &c.args),
            Expr::Comprehension(c) => {
                let (range_cost, range) = self.expr(&c.iter_range);
                let (init_cost, init) = self.expr(&c.accu_init);
                let (n, item) = range.iteration();
                let mut bound = vec![(c.iter_var.clone(), item)];
                if let Some(v2) = &c.iter_var2 {
                    // Two-variable forms: index and item of a list, key and value of a map.
                    let second = match &range {
                        Shape::List { item, .. } => (**item).clone(),
                        other => other.values(),
                    };
                    bound = vec![(c.iter_var.clone(), Shape::Scalar), (v2.clone(), second)];
                }
                let depth = self.scope.len();
                self.scope.extend(bound);
                // The accumulator's shape after one step tells how it grows (`map` and
                // `filter` append one item per step).
                self.scope.push((c.accu_var.clone(), init.clone()));
                let (_, first) = self.expr(&c.loop_step);
                let accu = grown(&init, &first, n);
                self.scope.pop();
                self.scope.push((c.accu_var.clone(), accu.clone()));
                let (cond_cost, _) = self.expr(&c.loop_cond);
                let (step_cost, _) = self.expr(&c.loop_step);
                let (result_cost, result) = self.expr(&c.result);
                self.scope.truncate(depth);
                let per_item = add(cond_cost, step_cost);
                let cost = add(
                    add(range_cost, init_cost),
                    add(mul(n, per_item), result_cost),
                );
                (cost, result)
            }
        }
    }

    fn entries(&mut self, es: &[cel::common::ast::IdedEntryExpr], base: u64) -> (u64, Shape) {
        let mut cost = base;
        let mut key = Shape::Text(0);
        let mut value: Option<Shape> = None;
        for en in es {
            let (k, v) = match &en.expr {
                EntryExpr::MapEntry(me) => (Some(&me.key), &me.value),
                EntryExpr::StructField(f) => (None, &f.value),
            };
            if let Some(k) = k {
                let (c, s) = self.expr(k);
                cost = add(cost, c);
                key = key.join(&s);
            }
            let (c, s) = self.expr(v);
            cost = add(cost, c);
            value = Some(value.map_or(s.clone(), |x| x.join(&s)));
        }
        (
            cost,
            Shape::map(es.len() as u64, key, value.unwrap_or(Shape::Scalar)),
        )
    }

    fn call(&mut self, name: &str, target: Option<&IdedExpr>, args: &[IdedExpr]) -> (u64, Shape) {
        use cel::common::ast::operators as op;
        // `math.ceil(x)` may arrive as a call on the identifier `math`.
        let (name, target) = match target.map(|t| &t.expr) {
            Some(Expr::Ident(ns)) if NAMESPACES.contains(&ns.as_str()) && !name.contains('.') => {
                (format!("{ns}.{name}"), None)
            }
            _ => (name.to_string(), target),
        };
        let name = name.as_str();
        match name {
            op::LOGICAL_AND | op::LOGICAL_OR => {
                let cost = args.iter().map(|a| self.expr(a).0).fold(0, add);
                return (cost, Shape::Scalar);
            }
            op::CONDITIONAL if args.len() == 3 => {
                let (c, _) = self.expr(&args[0]);
                let (a, sa) = self.expr(&args[1]);
                let (b, sb) = self.expr(&args[2]);
                return (add(c, a.max(b)), sa.join(&sb));
            }
            _ => {}
        }
        let mut cost = 0;
        let this = target.map(|t| {
            let (c, s) = self.expr(t);
            cost = add(cost, c);
            s
        });
        let mut shapes = Vec::with_capacity(args.len());
        for a in args {
            let (c, s) = self.expr(a);
            cost = add(cost, c);
            shapes.push(s);
        }
        // Receiver-style and global-style calls alike: `x.f(y)` as `f(x, y)`.
        let all: Vec<Shape> = this.into_iter().chain(shapes).collect();
        let accumulating =
            matches!(args.first().map(|a| &a.expr), Some(Expr::Ident(n)) if n.starts_with('@'));
        let literal_int = args.first().and_then(|a| match &a.expr {
            Expr::Literal(LiteralValue::Int(i)) => Some((*i.inner()).max(0) as u64),
            _ => None,
        });
        let (own, out) = function(name, &all, accumulating, literal_int);
        (add(cost, own), out)
    }
}

fn literal(l: &LiteralValue) -> Shape {
    match l {
        LiteralValue::String(s) => Shape::Text(s.inner().len() as u64),
        LiteralValue::Bytes(b) => Shape::Text(b.inner().len() as u64),
        _ => Shape::Scalar,
    }
}

/// The accumulator after `n` steps, given its start and its shape after one step.
fn grown(init: &Shape, first: &Shape, n: u64) -> Shape {
    match (init, first) {
        (Shape::List { len: a, .. }, Shape::List { len: b, item }) if b > a => {
            Shape::list(add(*a, mul(n, b - a)), (**item).clone())
        }
        _ => init.join(first),
    }
}

/// The work of function `name` on arguments of shapes `a` (the receiver first), and the
/// shape of its result.
fn function(name: &str, a: &[Shape], accumulating: bool, literal_int: Option<u64>) -> (u64, Shape) {
    use cel::common::ast::operators as op;
    let first = a.first().cloned().unwrap_or(Shape::Scalar);
    let second = a.get(1).cloned().unwrap_or(Shape::Scalar);
    let len = first.len();
    let walk_items = |per: u64| add(1, mul(len, per));
    match name {
        op::EQUALS
        | op::NOT_EQUALS
        | op::LESS
        | op::LESS_EQUALS
        | op::GREATER
        | op::GREATER_EQUALS => (equality(&first, &second), Shape::Scalar),
        op::ADD => match (&first, &second) {
            // `@result + [x]` of `map`/`filter`: cel-rust appends in place.
            (Shape::List { .. }, Shape::List { .. }) if accumulating => {
                (add(1, traversal(second.bytes())), first.join(&second))
            }
            (Shape::Text(x), Shape::Text(y)) => {
                (add(1, traversal(add(*x, *y))), Shape::Text(add(*x, *y)))
            }
            (Shape::List { len: x, item: i }, Shape::List { len: y, item: j }) => {
                (add(1, add(*x, *y)), Shape::list(add(*x, *y), i.join(j)))
            }
            (Shape::Scalar, Shape::Scalar) => (1, Shape::Scalar),
            _ => {
                let bytes = add(first.bytes(), second.bytes());
                (add(1, traversal(bytes)), Shape::Any(bytes))
            }
        },
        op::SUBSTRACT
        | op::MULTIPLY
        | op::DIVIDE
        | op::MODULO
        | op::NEGATE
        | op::LOGICAL_NOT
        | op::NOT_STRICTLY_FALSE => (1, Shape::Scalar),
        op::INDEX | op::OPT_INDEX => (1, first.values()),
        op::OPT_SELECT => (1, first.values()),
        op::IN => match &second {
            Shape::List { len, item } => (add(1, mul(*len, equality(&first, item))), Shape::Scalar),
            Shape::Any(n) => (add(1, mul(n / 2, equality(&first, &second))), Shape::Scalar),
            _ => (1, Shape::Scalar),
        },
        "size" | "isInf" | "isNaN" | "isFinite" | "hasValue" | "dyn" | "type" | "int" | "uint"
        | "double" | "bool" => {
            // Conversions of strings parse them.
            let parse = match (&first, name) {
                (Shape::Text(n), "int" | "uint" | "double" | "bool") => traversal(*n),
                _ => 0,
            };
            let out = if name == "dyn" { first } else { Shape::Scalar };
            (add(1, parse), out)
        }
        "timestamp" | "duration" => (add(1, traversal(first.bytes())), Shape::Scalar),
        "string" | "bytes" | "strings.quote" | "base64.encode" | "base64.decode" => {
            let bytes = match &first {
                Shape::Text(n) => *n,
                Shape::Scalar => 32,
                other => other.bytes(),
            };
            let out = if name == "strings.quote" || name == "base64.encode" {
                mul(bytes, 2).saturating_add(2)
            } else {
                bytes
            };
            (add(1, traversal(out)), Shape::Text(out))
        }
        "matches" => {
            let pattern = second.len();
            let cost = add(
                mul(first.len().div_ceil(4), pattern.div_ceil(4)),
                pattern.div_ceil(4),
            );
            (add(1, cost), Shape::Scalar)
        }
        "contains" | "startsWith" | "endsWith" => (
            add(1, traversal(add(first.len(), second.len()))),
            Shape::Scalar,
        ),
        "indexOf" | "lastIndexOf" => match &first {
            Shape::List { item, .. } => (walk_items(equality(item, &second)), Shape::Scalar),
            _ => (add(1, traversal(add(len, second.len()))), Shape::Scalar),
        },
        "lowerAscii" | "upperAscii" | "trim" | "charAt" | "substring" => {
            (add(1, traversal(len)), Shape::Text(len))
        }
        "reverse" => match &first {
            Shape::Text(n) => (add(1, traversal(*n)), Shape::Text(*n)),
            _ => (walk_items(1), first.clone()),
        },
        "replace" => {
            // Every gap of the string may receive the replacement.
            let out = add(len, mul(add(len, 1), a.get(2).map_or(0, Shape::len)));
            (add(1, traversal(add(len, out))), Shape::Text(out))
        }
        "split" => (
            add(1, add(traversal(len), len)),
            Shape::list(add(len, 1), Shape::Text(len)),
        ),
        "join" => {
            let (n, item) = first.as_list();
            let sep = second.len();
            let out = mul(n, add(item.len(), sep));
            (add(1, add(n, traversal(out))), Shape::Text(out))
        }
        "format" | "strings.format" => {
            let out = add(len, second.bytes());
            (add(1, traversal(out)), Shape::Text(out))
        }
        "isSorted" | "sum" => {
            let (_, item) = first.as_list();
            (walk_items(equality(&item, &item)), Shape::Scalar)
        }
        "min" | "max" if a.len() == 1 => {
            let (_, item) = first.as_list();
            (walk_items(equality(&item, &item)), item)
        }
        "sort" => {
            let (n, item) = first.as_list();
            let log = 64 - n.leading_zeros() as u64;
            (
                add(1, mul(mul(n, log.max(1)), equality(&item, &item))),
                first.clone(),
            )
        }
        "distinct" => {
            let (n, item) = first.as_list();
            (
                add(1, mul(mul(n, n), equality(&item, &item))),
                first.clone(),
            )
        }
        "slice" => (walk_items(1), first.clone()),
        "flatten" => {
            let (n, item) = first.as_list();
            match item {
                Shape::List {
                    len: m,
                    item: inner,
                } => {
                    let total = mul(n, m);
                    (add(1, total), Shape::list(total, *inner))
                }
                other => (walk_items(1), Shape::list(n, other)),
            }
        }
        "lists.range" => {
            let n = literal_int.unwrap_or(UNKNOWN_INT);
            (add(1, n), Shape::list(n, Shape::Scalar))
        }
        "check" => (AUTHZ_CHECK_COST, Shape::Scalar),
        "optional.of" | "optional.ofNonZeroValue" | "value" => (1, first.clone()),
        "orValue" | "or" => (1, first.join(&second)),
        _ => {
            // Unknown to this table: charge a walk over every argument, and bound the
            // result by all of them.
            let bytes = a.iter().map(Shape::bytes).fold(0, add);
            let scalar = a.iter().all(|s| *s == Shape::Scalar);
            if scalar {
                (1, Shape::Scalar)
            } else {
                (add(1, traversal(bytes)), Shape::Any(bytes))
            }
        }
    }
}
