//! The latest usage of every node and pod, as the last two scrapes of each kubelet give it.
//!
//! # Guarantees
//! - [`Store::record`] replaces the whole set: a node missing from a scrape (gone, or its
//!   kubelet unreachable) has no metrics until two scrapes reach it again, as with
//!   metrics-server.
//! - A scrape whose node point is not newer than the one kept leaves that node's entry alone
//!   (the kubelet answered from the same sample), so its usage does not vanish.

use std::collections::BTreeMap;
use std::sync::RwLock;

use super::points::NodePoints;
use super::usage::{between, NodeUsage, PodUsage, Usage};

#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Entry {
    points: NodePoints,
    usage: NodeUsage,
}

/// The metrics the API serves.
#[derive(Debug, Default)]
pub struct Store {
    nodes: RwLock<BTreeMap<String, Entry>>,
}

/// The entry after scraping `last` from a node whose previous entry is `prev`.
fn advance(prev: Option<&Entry>, last: NodePoints) -> Entry {
    let Some(prev) = prev else {
        return Entry {
            points: last,
            usage: NodeUsage::default(),
        };
    };
    let stale = match (&prev.points.node, &last.node) {
        (Some(p), Some(l)) => l.timestamp <= p.timestamp,
        _ => false,
    };
    if stale {
        return prev.clone();
    }
    Entry {
        usage: between(&prev.points, &last),
        points: last,
    }
}

impl Store {
    /// Records one scrape of every node that answered, by node name.
    pub fn record(&self, scraped: BTreeMap<String, NodePoints>) {
        let mut nodes = self.nodes.write().unwrap_or_else(|p| p.into_inner());
        let next = scraped
            .into_iter()
            .map(|(name, last)| {
                let entry = advance(nodes.get(&name), last);
                (name, entry)
            })
            .collect();
        *nodes = next;
    }

    /// The node's usage, if known.
    pub fn node(&self, name: &str) -> Option<Usage> {
        let nodes = self.nodes.read().unwrap_or_else(|p| p.into_inner());
        nodes.get(name).and_then(|e| e.usage.node)
    }

    /// The pod's usage, if known (from whichever node runs it).
    pub fn pod(&self, namespace: &str, name: &str) -> Option<PodUsage> {
        let nodes = self.nodes.read().unwrap_or_else(|p| p.into_inner());
        let key = (namespace.to_string(), name.to_string());
        nodes.values().find_map(|e| e.usage.pods.get(&key).cloned())
    }
}

#[cfg(test)]
mod tests {
    use super::super::points::Point;
    use super::*;
    use k8s_openapi::jiff::Timestamp;

    fn scrape(secs: i64, cpu: u64) -> NodePoints {
        NodePoints {
            node: Some(Point {
                timestamp: Timestamp::from_second(secs).unwrap(),
                cpu_core_nanos: cpu,
                memory_working_set: 100,
                start: None,
            }),
            ..Default::default()
        }
    }

    fn once(name: &str, points: NodePoints) -> BTreeMap<String, NodePoints> {
        [(name.to_string(), points)].into()
    }

    #[test]
    fn usage_after_two_scrapes_and_gone_with_the_node() {
        let s = Store::default();
        s.record(once("n1", scrape(0, 0)));
        assert_eq!(s.node("n1"), None);
        s.record(once("n1", scrape(10, 5_000_000_000)));
        assert_eq!(s.node("n1").unwrap().nano_cores, 500_000_000);
        // The same sample again keeps the usage.
        s.record(once("n1", scrape(10, 5_000_000_000)));
        assert_eq!(s.node("n1").unwrap().nano_cores, 500_000_000);
        s.record(once("n1", scrape(20, 7_000_000_000)));
        assert_eq!(s.node("n1").unwrap().nano_cores, 200_000_000);
        s.record(BTreeMap::new());
        assert_eq!(s.node("n1"), None);
        s.record(once("n1", scrape(30, 8_000_000_000)));
        assert_eq!(s.node("n1"), None);
    }
}
