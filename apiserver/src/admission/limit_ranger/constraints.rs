//! The validating half of LimitRanger: `min`, `max` and `maxLimitRequestRatio` of a
//! LimitRange's `Container`, `Pod` and `PersistentVolumeClaim` items, checked against what the
//! object requests, with kube-apiserver's messages. All violations are reported together.

use std::collections::BTreeMap;

use serde_json::Value;

use k3rs_apimachinery::quota::amount::Amount;

/// A resource list (`requests` or `limits`) as amounts; unparsable entries are left out
/// (validation has refused them already).
type List = BTreeMap<String, Amount>;

fn list(v: &Value) -> List {
    v.as_object()
        .into_iter()
        .flatten()
        .filter_map(|(k, q)| Some((k.clone(), Amount::of(q)?)))
        .collect()
}

/// One item's constraints.
fn item_lists(item: &Value) -> [(String, List); 3] {
    ["min", "max", "maxLimitRequestRatio"].map(|f| (f.to_string(), list(&item[f])))
}

fn min_constraint(ty: &str, res: &str, enforced: Amount, req: &List, lim: &List) -> Option<String> {
    let e = enforced.render();
    let Some(r) = req.get(res) else {
        return Some(format!(
            "minimum {res} usage per {ty} is {e}.  No request is specified"
        ));
    };
    if r.milli < enforced.milli {
        return Some(format!(
            "minimum {res} usage per {ty} is {e}, but request is {}",
            r.render()
        ));
    }
    match lim.get(res) {
        Some(l) if l.milli < enforced.milli => Some(format!(
            "minimum {res} usage per {ty} is {e}, but limit is {}",
            l.render()
        )),
        _ => None,
    }
}

fn max_constraint(ty: &str, res: &str, enforced: Amount, req: &List, lim: &List) -> Option<String> {
    let e = enforced.render();
    let Some(l) = lim.get(res) else {
        return Some(format!(
            "maximum {res} usage per {ty} is {e}.  No limit is specified"
        ));
    };
    if l.milli > enforced.milli {
        return Some(format!(
            "maximum {res} usage per {ty} is {e}, but limit is {}",
            l.render()
        ));
    }
    match req.get(res) {
        Some(r) if r.milli > enforced.milli => Some(format!(
            "maximum {res} usage per {ty} is {e}, but request is {}",
            r.render()
        )),
        _ => None,
    }
}

fn max_request_constraint(ty: &str, res: &str, enforced: Amount, req: &List) -> Option<String> {
    let e = enforced.render();
    match req.get(res) {
        None => Some(format!(
            "maximum {res} usage per {ty} is {e}.  No request is specified"
        )),
        Some(r) if r.milli > enforced.milli => Some(format!(
            "maximum {res} usage per {ty} is {e}, but request is {}",
            r.render()
        )),
        _ => None,
    }
}

fn ratio_constraint(
    ty: &str,
    res: &str,
    enforced: Amount,
    req: &List,
    lim: &List,
) -> Option<String> {
    let e = enforced.render();
    let r = req.get(res).map_or(0, |a| a.milli);
    if r == 0 {
        return Some(format!(
            "{res} max limit to request ratio per {ty} is {e}, but no request is specified or request is 0"
        ));
    }
    let l = lim.get(res).map_or(0, |a| a.milli);
    if l == 0 {
        return Some(format!(
            "{res} max limit to request ratio per {ty} is {e}, but no limit is specified or limit is 0"
        ));
    }
    let observed = l as f64 / r as f64;
    (observed * 1000.0 > enforced.milli as f64).then(|| {
        format!(
            "{res} max limit to request ratio per {ty} is {e}, but provided ratio is {observed:.6}"
        )
    })
}

/// Every violation of `item`'s three constraint kinds by one `req`/`lim` pair.
fn check(ty: &str, item: &Value, req: &List, lim: &List, errs: &mut Vec<String>) {
    let [(_, min), (_, max), (_, ratio)] = item_lists(item);
    errs.extend(
        min.iter()
            .filter_map(|(k, v)| min_constraint(ty, k, *v, req, lim)),
    );
    errs.extend(
        max.iter()
            .filter_map(|(k, v)| max_constraint(ty, k, *v, req, lim)),
    );
    errs.extend(
        ratio
            .iter()
            .filter_map(|(k, v)| ratio_constraint(ty, k, *v, req, lim)),
    );
}

fn resources(c: &Value) -> (List, List) {
    (
        list(&c["resources"]["requests"]),
        list(&c["resources"]["limits"]),
    )
}

/// The pod's totals: the containers' sum, raised to any init container's own value.
fn pod_totals(pod: &Value) -> (List, List) {
    let (mut req, mut lim) = (List::new(), List::new());
    for c in pod["spec"]["containers"].as_array().into_iter().flatten() {
        let (r, l) = resources(c);
        for (total, part) in [(&mut req, r), (&mut lim, l)] {
            for (k, v) in part {
                let sum = total.get(&k).map_or(v, |t| t.plus(v));
                total.insert(k, sum);
            }
        }
    }
    for c in pod["spec"]["initContainers"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let (r, l) = resources(c);
        for (total, part) in [(&mut req, r), (&mut lim, l)] {
            for (k, v) in part {
                if total.get(&k).is_none_or(|t| v.milli > t.milli) {
                    total.insert(k, v);
                }
            }
        }
    }
    (req, lim)
}

/// The violations of `limit_range` by a pod.
pub fn pod_violations(limit_range: &Value, pod: &Value) -> Vec<String> {
    let mut errs = Vec::new();
    for item in limit_range["spec"]["limits"]
        .as_array()
        .into_iter()
        .flatten()
    {
        match item["type"].as_str() {
            Some("Container") => {
                for list in ["containers", "initContainers"] {
                    for c in pod["spec"][list].as_array().into_iter().flatten() {
                        let (req, lim) = resources(c);
                        check("Container", item, &req, &lim, &mut errs);
                    }
                }
            }
            Some("Pod") => {
                let (req, lim) = pod_totals(pod);
                check("Pod", item, &req, &lim, &mut errs);
            }
            _ => {}
        }
    }
    errs
}

/// The violations of `limit_range` by a PersistentVolumeClaim (its requests only).
pub fn claim_violations(limit_range: &Value, claim: &Value) -> Vec<String> {
    let req = list(&claim["spec"]["resources"]["requests"]);
    let mut errs = Vec::new();
    let items = limit_range["spec"]["limits"]
        .as_array()
        .into_iter()
        .flatten();
    for item in items.filter(|i| i["type"] == "PersistentVolumeClaim") {
        let [(_, min), (_, max), _] = item_lists(item);
        let ty = "PersistentVolumeClaim";
        errs.extend(
            min.iter()
                .filter_map(|(k, v)| min_constraint(ty, k, *v, &req, &List::new())),
        );
        errs.extend(
            max.iter()
                .filter_map(|(k, v)| max_request_constraint(ty, k, *v, &req)),
        );
    }
    errs
}

/// `utilerrors.NewAggregate(errs).Error()`: one message alone, several in brackets, each once.
pub fn aggregate(errs: &[String]) -> Option<String> {
    let mut seen: Vec<&str> = Vec::new();
    for e in errs {
        if !seen.contains(&e.as_str()) {
            seen.push(e);
        }
    }
    match seen.len() {
        0 => None,
        1 => Some(seen[0].to_string()),
        _ => Some(format!("[{}]", seen.join(", "))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn container(name: &str, req: Value, lim: Value) -> Value {
        json!({"name": name, "resources": {"requests": req, "limits": lim}})
    }

    #[test]
    fn container_min_max_and_ratio() {
        let lr = json!({"spec": {"limits": [{"type": "Container",
            "min": {"cpu": "100m"}, "max": {"memory": "1Gi"},
            "maxLimitRequestRatio": {"cpu": "2"}}]}});
        let ok = json!({"spec": {"containers": [container("a",
            json!({"cpu": "200m", "memory": "100Mi"}), json!({"cpu": "400m", "memory": "1Gi"}))]}});
        assert_eq!(pod_violations(&lr, &ok), Vec::<String>::new());

        let bad = json!({"spec": {"containers": [container("a",
            json!({"cpu": "50m"}), json!({"cpu": "1", "memory": "2Gi"}))]}});
        assert_eq!(
            pod_violations(&lr, &bad),
            vec![
                "minimum cpu usage per Container is 100m, but request is 50m",
                "maximum memory usage per Container is 1Gi, but limit is 2Gi",
                "cpu max limit to request ratio per Container is 2, but provided ratio is 20.000000",
            ]
        );
        let bare = json!({"spec": {"containers": [{"name": "a"}]}});
        assert_eq!(
            pod_violations(&lr, &bare),
            vec![
                "minimum cpu usage per Container is 100m.  No request is specified",
                "maximum memory usage per Container is 1Gi.  No limit is specified",
                "cpu max limit to request ratio per Container is 2, but no request is specified or request is 0",
            ]
        );
    }

    #[test]
    fn min_checks_a_limit_below_it_and_max_a_request_above_it() {
        let lr = json!({"spec": {"limits": [{"type": "Container", "min": {"memory": "64Mi"},
                                             "max": {"cpu": "1"}}]}});
        let pod = json!({"spec": {"containers": [container("a",
            json!({"memory": "64Mi", "cpu": "2"}), json!({"memory": "32Mi", "cpu": "1"}))]}});
        assert_eq!(
            pod_violations(&lr, &pod),
            vec![
                "minimum memory usage per Container is 64Mi, but limit is 32Mi",
                "maximum cpu usage per Container is 1, but request is 2",
            ]
        );
    }

    #[test]
    fn pod_items_sum_containers_and_take_the_largest_init_container() {
        let lr = json!({"spec": {"limits": [{"type": "Pod", "max": {"cpu": "1"}}]}});
        let two = |init: &str| {
            json!({"spec": {
            "initContainers": [container("i", json!({}), json!({"cpu": init}))],
            "containers": [container("a", json!({}), json!({"cpu": "400m"})),
                           container("b", json!({}), json!({"cpu": "500m"}))]}})
        };
        assert_eq!(pod_violations(&lr, &two("100m")), Vec::<String>::new());
        assert_eq!(
            pod_violations(&lr, &two("1500m")),
            vec!["maximum cpu usage per Pod is 1, but limit is 1500m"]
        );
    }

    #[test]
    fn claims_are_checked_on_their_requests() {
        let lr = json!({"spec": {"limits": [{"type": "PersistentVolumeClaim",
            "min": {"storage": "1Gi"}, "max": {"storage": "10Gi"}}]}});
        let claim = |s: &str| json!({"spec": {"resources": {"requests": {"storage": s}}}});
        assert_eq!(claim_violations(&lr, &claim("5Gi")), Vec::<String>::new());
        assert_eq!(
            claim_violations(&lr, &claim("500Mi")),
            vec!["minimum storage usage per PersistentVolumeClaim is 1Gi, but request is 500Mi"]
        );
        assert_eq!(
            claim_violations(&lr, &claim("20Gi")),
            vec!["maximum storage usage per PersistentVolumeClaim is 10Gi, but request is 20Gi"]
        );
    }

    #[test]
    fn aggregates_like_go() {
        assert_eq!(aggregate(&[]), None);
        assert_eq!(aggregate(&["a".into()]).unwrap(), "a");
        assert_eq!(
            aggregate(&["a".into(), "b".into(), "a".into()]).unwrap(),
            "[a, b]"
        );
    }
}
