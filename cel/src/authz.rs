//! Kubernetes' authorizer library (k8s.io/apiserver/pkg/cel/library/authz.go): the
//! `authorizer` variable of ValidatingAdmissionPolicies, with which an expression asks
//! whether the requesting user (or a service account) may do something else.
//!
//! ```text
//! authorizer.group('apps').resource('deployments').namespace('ns').name('web').check('scale').allowed()
//! authorizer.requestResource.subresource('status').check('update').reason()
//! authorizer.path('/healthz').check('get').allowed()
//! authorizer.serviceAccount('ns', 'sa').group('').resource('pods').check('list').errored()
//! ```
//!
//! # Guarantees
//! - The library only builds queries; the [`Checker`] given with the variable answers them,
//!   synchronously, so expressions stay free of I/O of their own.
//! - Values of these types are opaque: they compare equal to nothing and convert to JSON as
//!   nothing; only their own methods apply to them.

use std::any::Any;
use std::sync::Arc;

use cel::common::functions::Function;
use cel::common::types::{CelBool, CelString, Type, STRING_TYPE};
use cel::common::value::{CowVal, StaticVal, Val};
use cel::{DeclarationError, Env, ExecutionError};

static AUTHORIZER: Type = Type::new_unspecified_type("kubernetes.authorization.Authorizer");
static PATH_CHECK: Type = Type::new_unspecified_type("kubernetes.authorization.PathCheck");
static GROUP_CHECK: Type = Type::new_unspecified_type("kubernetes.authorization.GroupCheck");
static RESOURCE_CHECK: Type = Type::new_unspecified_type("kubernetes.authorization.ResourceCheck");
static DECISION: Type = Type::new_unspecified_type("kubernetes.authorization.Decision");

/// A copy of one of the types above, for declarations (which take types by value).
fn ty(t: &'static Type) -> Type {
    Type::new_unspecified_type(t.name())
}

/// What one check asks.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Query {
    /// `(namespace, name)` of the service account asked about; the requester when `None`.
    pub service_account: Option<(String, String)>,
    /// The verb checked (`get`, `create`, …).
    pub verb: String,
    /// A non-resource request's path; `None` for resource requests.
    pub path: Option<String>,
    /// The API group (`""` for core).
    pub group: String,
    /// The resource (plural).
    pub resource: String,
    /// The subresource (`""` for none).
    pub subresource: String,
    /// The namespace (`""` for cluster scope or all namespaces).
    pub namespace: String,
    /// The object's name (`""` for any).
    pub name: String,
}

/// The answer to a [`Query`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Answer {
    /// Whether the chain allows the query.
    pub allowed: bool,
    /// The deciding authorizer's reason.
    pub reason: String,
    /// Why the authorizer could not decide.
    pub error: Option<String>,
}

/// Answers queries (the server's authorizer chain).
pub type Checker = Arc<dyn Fn(&Query) -> Answer + Send + Sync>;

/// The `authorizer` variable: `checker` answers, `request` is the resource of the request
/// being admitted (`authorizer.requestResource`).
#[derive(Clone)]
pub struct Variable {
    /// Answers the expression's checks.
    pub checker: Checker,
    /// The resource of the request being admitted (`None`: not a resource request).
    pub request: Option<Query>,
}

impl std::fmt::Debug for Variable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Variable")
            .field("request", &self.request)
            .finish_non_exhaustive()
    }
}

impl Variable {
    /// The variable's value.
    pub fn value(&self) -> Box<dyn Val> {
        Box::new(Authorizer {
            checker: self.checker.clone(),
            service_account: None,
            request: self.request.clone(),
        })
    }
}

/// The library's methods: name, overload id, receiver type, number of string arguments.
const METHODS: &[(&str, &str, &Type, usize, Function)] = &[
    ("path", "authorizer_path", &AUTHORIZER, 1, path),
    ("group", "authorizer_group", &AUTHORIZER, 1, group),
    (
        "serviceAccount",
        "authorizer_serviceaccount",
        &AUTHORIZER,
        2,
        service_account,
    ),
    ("resource", "groupcheck_resource", &GROUP_CHECK, 1, resource),
    (
        "subresource",
        "resourcecheck_subresource",
        &RESOURCE_CHECK,
        1,
        subresource,
    ),
    (
        "namespace",
        "resourcecheck_namespace",
        &RESOURCE_CHECK,
        1,
        namespace,
    ),
    ("name", "resourcecheck_name", &RESOURCE_CHECK, 1, name),
    ("check", "resourcecheck_check", &RESOURCE_CHECK, 1, check),
    ("check", "pathcheck_check", &PATH_CHECK, 1, check),
    ("allowed", "decision_allowed", &DECISION, 0, allowed),
    ("reason", "decision_reason", &DECISION, 0, reason),
    ("errored", "decision_errored", &DECISION, 0, errored),
    ("error", "decision_error", &DECISION, 0, error),
];

/// Registers the library's methods on `env`.
pub fn extension(env: &mut Env) -> Result<(), DeclarationError> {
    for &(name, id, target, strings, f) in METHODS {
        let args = (0..strings).map(|_| STRING_TYPE).collect();
        env.add_member_overload(name, id, ty(target), args, f)?;
    }
    Ok(())
}

#[derive(Clone)]
struct Authorizer {
    checker: Checker,
    service_account: Option<(String, String)>,
    request: Option<Query>,
}

impl std::fmt::Debug for Authorizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authorizer")
            .field("service_account", &self.service_account)
            .finish_non_exhaustive()
    }
}

/// A check being built: a path, a group, or a resource.
#[derive(Clone)]
struct Check {
    checker: Checker,
    query: Query,
    ty: &'static Type,
}

impl std::fmt::Debug for Check {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Check")
            .field("query", &self.query)
            .finish_non_exhaustive()
    }
}

#[derive(Debug, Clone)]
struct Decision(Answer);

macro_rules! opaque {
    ($t:ty, $self_:ident => $ty:expr, $static_ty:expr) => {
        impl Val for $t {
            fn get_type(&self) -> &Type {
                let $self_ = self;
                $ty
            }
            fn cel_type() -> &'static Type {
                $static_ty
            }
            fn clone_as_boxed<'v>(&self) -> Box<dyn Val + 'v> {
                Box::new(self.clone())
            }
            fn as_any(&self) -> Option<&dyn Any> {
                Some(self)
            }
        }
        impl StaticVal for $t {}
    };
}

impl Val for Authorizer {
    fn get_type(&self) -> &Type {
        &AUTHORIZER
    }
    fn cel_type() -> &'static Type {
        &AUTHORIZER
    }
    fn clone_as_boxed<'v>(&self) -> Box<dyn Val + 'v> {
        Box::new(self.clone())
    }
    fn as_any(&self) -> Option<&dyn Any> {
        Some(self)
    }
    fn as_indexer<'b, 'v>(&'b self) -> Option<&'b (dyn cel::common::traits::Indexer + 'v)>
    where
        Self: 'v,
    {
        Some(self)
    }
}
impl StaticVal for Authorizer {}
opaque!(Check, c => c.ty, &RESOURCE_CHECK);
opaque!(Decision, _d => &DECISION, &DECISION);

impl cel::common::traits::Indexer for Authorizer {
    fn get<'b, 'v>(&'b self, idx: &dyn Val) -> Result<CowVal<'b, 'v>, ExecutionError>
    where
        Self: 'v,
    {
        match (<&str>::try_from(idx), &self.request) {
            (Ok("requestResource"), Some(q)) => Ok(CowVal::owned(Check {
                checker: self.checker.clone(),
                query: q.clone(),
                ty: &RESOURCE_CHECK,
            })),
            (Ok(k), _) => Err(ExecutionError::NoSuchKey(Arc::new(k.to_string()))),
            (Err(_), _) => Err(ExecutionError::function_error(
                "authorizer",
                "no such field",
            )),
        }
    }

    fn steal<'v>(self: Box<Self>, idx: &dyn Val) -> Result<Box<dyn Val + 'v>, ExecutionError>
    where
        Self: 'v,
    {
        self.get(idx).map(CowVal::into_owned)
    }
}

fn this<'a, T: StaticVal>(args: &'a [CowVal<'_, '_>], f: &str) -> Result<&'a T, ExecutionError> {
    args.first()
        .and_then(|a| a.downcast_ref::<T>())
        .ok_or_else(|| ExecutionError::function_error(f, "no such overload"))
}

fn string_arg(args: &[CowVal<'_, '_>], i: usize, f: &str) -> Result<String, ExecutionError> {
    args.get(i)
        .and_then(|a| <&str>::try_from(a.as_ref()).ok())
        .map(str::to_string)
        .ok_or_else(|| ExecutionError::function_error(f, "expects a string argument"))
}

/// Starts a check from authorizer `a`: `set` fills in the query, `ty` is what it becomes.
fn start<'b, 'v>(
    a: &Authorizer,
    ty: &'static Type,
    set: impl FnOnce(&mut Query),
) -> CowVal<'b, 'v> {
    let mut query = Query {
        service_account: a.service_account.clone(),
        ..Query::default()
    };
    set(&mut query);
    CowVal::owned(Check {
        checker: a.checker.clone(),
        query,
        ty,
    })
}

fn path<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let a = this::<Authorizer>(&args, "path")?;
    let p = string_arg(&args, 1, "path")?;
    Ok(start(a, &PATH_CHECK, |q| q.path = Some(p)))
}

fn group<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let a = this::<Authorizer>(&args, "group")?;
    let g = string_arg(&args, 1, "group")?;
    Ok(start(a, &GROUP_CHECK, |q| q.group = g))
}

fn service_account<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let a = this::<Authorizer>(&args, "serviceAccount")?;
    let namespace = string_arg(&args, 1, "serviceAccount")?;
    let name = string_arg(&args, 2, "serviceAccount")?;
    Ok(CowVal::owned(Authorizer {
        checker: a.checker.clone(),
        service_account: Some((namespace, name)),
        request: None,
    }))
}

/// A method that sets one field of a check and returns it as a resource check.
macro_rules! setter {
    ($f:ident, $name:literal, $field:ident) => {
        fn $f<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
            let mut c = this::<Check>(&args, $name)?.clone();
            c.query.$field = string_arg(&args, 1, $name)?;
            c.ty = &RESOURCE_CHECK;
            Ok(CowVal::owned(c))
        }
    };
}

setter!(resource, "resource", resource);
setter!(subresource, "subresource", subresource);
setter!(namespace, "namespace", namespace);
setter!(name, "name", name);

fn check<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let c = this::<Check>(&args, "check")?;
    let mut query = c.query.clone();
    query.verb = string_arg(&args, 1, "check")?;
    Ok(CowVal::owned(Decision((c.checker)(&query))))
}

fn allowed<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let d = this::<Decision>(&args, "allowed")?;
    Ok(CowVal::owned(CelBool::from(d.0.allowed)))
}

fn reason<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let d = this::<Decision>(&args, "reason")?;
    Ok(CowVal::owned(CelString::from(d.0.reason.clone())))
}

fn errored<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let d = this::<Decision>(&args, "errored")?;
    Ok(CowVal::owned(CelBool::from(d.0.error.is_some())))
}

fn error<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let d = this::<Decision>(&args, "error")?;
    Ok(CowVal::owned(CelString::from(
        d.0.error.clone().unwrap_or_default(),
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{compile, evaluate, Var};
    use std::sync::Mutex;

    /// Allows `get` only, records every query.
    fn variable(log: Arc<Mutex<Vec<Query>>>) -> Variable {
        let checker: Checker = Arc::new(move |q: &Query| {
            log.lock().unwrap().push(q.clone());
            if q.verb == "get" {
                Answer {
                    allowed: true,
                    ..Answer::default()
                }
            } else if q.verb == "boom" {
                Answer {
                    allowed: false,
                    reason: String::new(),
                    error: Some("webhook unreachable".into()),
                }
            } else {
                Answer {
                    allowed: false,
                    reason: format!("no {}", q.verb),
                    error: None,
                }
            }
        });
        Variable {
            checker,
            request: Some(Query {
                group: "apps".into(),
                resource: "deployments".into(),
                namespace: "ns".into(),
                name: "web".into(),
                ..Query::default()
            }),
        }
    }

    fn run(src: &str, v: &Variable) -> Result<cel::Value, String> {
        let c = compile(src, &["authorizer"]).map_err(|e| e.to_string())?;
        evaluate(
            &c.program,
            &vec![("authorizer", Var::Authorizer(Box::new(v.clone())))],
        )
        .map_err(|e| e.to_string())
    }

    #[test]
    fn resource_checks_carry_every_part() {
        let log = Arc::default();
        let v = variable(Arc::clone(&log));
        let src = "authorizer.group('apps').resource('deployments').subresource('scale').namespace('prod').name('api').check('get').allowed()";
        assert_eq!(run(src, &v), Ok(cel::Value::Bool(true)));
        let q = log.lock().unwrap()[0].clone();
        assert_eq!(
            q,
            Query {
                service_account: None,
                verb: "get".into(),
                path: None,
                group: "apps".into(),
                resource: "deployments".into(),
                subresource: "scale".into(),
                namespace: "prod".into(),
                name: "api".into(),
            }
        );
    }

    #[test]
    fn decisions_tell_allowed_reason_and_error() {
        let v = variable(Arc::default());
        let check = |verb: &str, m: &str| {
            run(
                &format!("authorizer.group('').resource('pods').check('{verb}').{m}()"),
                &v,
            )
        };
        assert_eq!(check("delete", "allowed"), Ok(cel::Value::Bool(false)));
        assert_eq!(
            check("delete", "reason"),
            Ok(cel::Value::String(Arc::new("no delete".into())))
        );
        assert_eq!(check("delete", "errored"), Ok(cel::Value::Bool(false)));
        assert_eq!(check("boom", "errored"), Ok(cel::Value::Bool(true)));
        assert_eq!(
            check("boom", "error"),
            Ok(cel::Value::String(Arc::new("webhook unreachable".into())))
        );
    }

    #[test]
    fn request_resource_paths_and_service_accounts() {
        let log: Arc<Mutex<Vec<Query>>> = Arc::default();
        let v = variable(Arc::clone(&log));
        assert_eq!(
            run("authorizer.requestResource.check('update').allowed()", &v),
            Ok(cel::Value::Bool(false))
        );
        assert_eq!(
            run("authorizer.path('/healthz').check('get').allowed()", &v),
            Ok(cel::Value::Bool(true))
        );
        assert_eq!(
            run(
                "authorizer.serviceAccount('kube-system', 'builder').group('').resource('secrets').check('list').allowed()",
                &v
            ),
            Ok(cel::Value::Bool(false))
        );
        let log = log.lock().unwrap();
        assert_eq!(
            (
                log[0].resource.as_str(),
                log[0].name.as_str(),
                log[0].verb.as_str()
            ),
            ("deployments", "web", "update")
        );
        assert_eq!(log[1].path.as_deref(), Some("/healthz"));
        assert_eq!(
            log[2].service_account,
            Some(("kube-system".into(), "builder".into()))
        );
    }

    #[test]
    fn misuse_is_an_error_not_a_panic() {
        let v = variable(Arc::default());
        for src in [
            "authorizer.check('get')",
            "authorizer.group('').check('get').allowed()",
            "authorizer.group(1)",
            "authorizer.nothing",
            "authorizer == authorizer",
            "'x'.allowed()",
        ] {
            let r = run(src, &v);
            assert!(!matches!(r, Ok(cel::Value::Bool(true))), "{src}: {r:?}");
        }
    }
}
