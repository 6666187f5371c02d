//! What to apply and what to prune, given the manifest files as read now and the records of
//! what earlier passes applied. Pure: the shell ([`super::run`]) executes the steps.
//!
//! # Guarantees
//! - A file whose checksum equals its record's is left alone (k3s: the checksum decides).
//! - An object is pruned only when no readable file declares it any more, and never while
//!   the file that applied it cannot be read (its current content is unknown).
//! - Apply order: Namespaces, then CustomResourceDefinitions, then the rest in file order;
//!   prune order is the reverse (so a namespace goes after what it holds).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::manifest::{Manifest, ManifestError, ObjectRef};
use super::record::Record;

/// One thing to do for one file.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// Apply the file's objects (in order), then prune what its record lists that no file
    /// declares now, then record `checksum` and the objects.
    Apply {
        source: String,
        checksum: String,
        objects: Vec<(ObjectRef, Value)>,
        prune: Vec<ObjectRef>,
        /// What the record lists now (kept in it until applied or pruned).
        recorded: Vec<ObjectRef>,
    },
    /// The file cannot be read as objects: report it; touch nothing.
    Invalid {
        source: String,
        checksum: String,
        error: ManifestError,
    },
    /// The file is gone (or has a `.skip`): prune what it applied, then drop its record.
    Remove {
        source: String,
        prune: Vec<ObjectRef>,
    },
}

/// The steps for `manifests` (the files to apply now, `.skip`ped ones left out) against
/// `records`.
pub fn plan(manifests: &[Manifest], records: &[Record]) -> Vec<Step> {
    let by_source: BTreeMap<&str, &Record> =
        records.iter().map(|r| (r.source.as_str(), r)).collect();
    // Everything some file still declares, or may declare (unreadable files keep theirs).
    let mut keep: BTreeSet<&ObjectRef> = BTreeSet::new();
    for m in manifests {
        match &m.objects {
            Ok(objects) => keep.extend(objects.iter().map(|(r, _)| r)),
            Err(_) => {
                if let Some(rec) = by_source.get(m.source.as_str()) {
                    keep.extend(rec.objects.iter());
                }
            }
        }
    }
    let prunable = |recorded: &[ObjectRef]| -> Vec<ObjectRef> {
        let mut out: Vec<ObjectRef> = recorded
            .iter()
            .filter(|r| !keep.contains(r))
            .cloned()
            .collect();
        out.sort_by_key(|r| std::cmp::Reverse(rank(&r.kind)));
        out
    };
    let mut steps = Vec::new();
    for m in manifests {
        let rec = by_source.get(m.source.as_str());
        if rec.is_some_and(|r| r.checksum == m.checksum) {
            continue;
        }
        let recorded = rec.map(|r| r.objects.clone()).unwrap_or_default();
        match &m.objects {
            Ok(objects) => {
                let mut objects = objects.clone();
                objects.sort_by_key(|(r, _)| rank(&r.kind));
                steps.push(Step::Apply {
                    source: m.source.clone(),
                    checksum: m.checksum.clone(),
                    objects,
                    prune: prunable(&recorded),
                    recorded,
                });
            }
            Err(error) => steps.push(Step::Invalid {
                source: m.source.clone(),
                checksum: m.checksum.clone(),
                error: error.clone(),
            }),
        }
    }
    let present: BTreeSet<&str> = manifests.iter().map(|m| m.source.as_str()).collect();
    for rec in records {
        if !present.contains(rec.source.as_str()) {
            steps.push(Step::Remove {
                source: rec.source.clone(),
                prune: prunable(&rec.objects),
            });
        }
    }
    steps
}

/// Namespaces first, CRDs next, everything else after (stable within a rank).
fn rank(kind: &str) -> u8 {
    match kind {
        "Namespace" => 0,
        "CustomResourceDefinition" => 1,
        _ => 2,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn r(kind: &str, name: &str) -> ObjectRef {
        ObjectRef {
            api_version: "v1".into(),
            kind: kind.into(),
            namespace: (kind != "Namespace" && kind != "CustomResourceDefinition")
                .then(|| "demo".into()),
            name: name.into(),
        }
    }

    fn manifest(source: &str, checksum: &str, refs: &[ObjectRef]) -> Manifest {
        Manifest {
            source: source.into(),
            checksum: checksum.into(),
            objects: Ok(refs
                .iter()
                .map(|r| (r.clone(), json!({"kind": r.kind, "name": r.name})))
                .collect()),
        }
    }

    fn record(source: &str, checksum: &str, refs: &[ObjectRef]) -> Record {
        Record {
            source: source.into(),
            checksum: checksum.into(),
            objects: refs.to_vec(),
        }
    }

    fn applied(step: &Step) -> (Vec<ObjectRef>, Vec<ObjectRef>) {
        match step {
            Step::Apply { objects, prune, .. } => (
                objects.iter().map(|(r, _)| r.clone()).collect(),
                prune.clone(),
            ),
            other => panic!("not an apply: {other:?}"),
        }
    }

    #[test]
    fn a_new_file_is_applied_namespaces_and_crds_first() {
        let m = manifest(
            "a.yaml",
            "c1",
            &[
                r("ConfigMap", "cm"),
                r("CustomResourceDefinition", "crd"),
                r("Namespace", "demo"),
                r("Secret", "s"),
            ],
        );
        let steps = plan(&[m], &[]);
        assert_eq!(steps.len(), 1);
        assert_eq!(
            applied(&steps[0]),
            (
                vec![
                    r("Namespace", "demo"),
                    r("CustomResourceDefinition", "crd"),
                    r("ConfigMap", "cm"),
                    r("Secret", "s"),
                ],
                vec![]
            )
        );
    }

    #[test]
    fn an_unchanged_checksum_does_nothing() {
        let refs = [r("ConfigMap", "cm")];
        assert_eq!(
            plan(
                &[manifest("a.yaml", "c1", &refs)],
                &[record("a.yaml", "c1", &refs)]
            ),
            vec![]
        );
    }

    #[test]
    fn an_edit_prunes_what_the_file_no_longer_declares() {
        let steps = plan(
            &[manifest("a.yaml", "c2", &[r("ConfigMap", "cm")])],
            &[record(
                "a.yaml",
                "c1",
                &[
                    r("Namespace", "demo"),
                    r("ConfigMap", "cm"),
                    r("Secret", "s"),
                ],
            )],
        );
        assert_eq!(
            steps,
            vec![Step::Apply {
                source: "a.yaml".into(),
                checksum: "c2".into(),
                objects: vec![(
                    r("ConfigMap", "cm"),
                    json!({"kind": "ConfigMap", "name": "cm"})
                )],
                prune: vec![r("Secret", "s"), r("Namespace", "demo")],
                recorded: vec![
                    r("Namespace", "demo"),
                    r("ConfigMap", "cm"),
                    r("Secret", "s")
                ],
            }]
        );
    }

    #[test]
    fn a_removed_file_prunes_namespaces_last_but_not_what_another_file_declares() {
        let steps = plan(
            &[manifest("b.yaml", "b1", &[r("ConfigMap", "moved")])],
            &[
                record(
                    "a.yaml",
                    "c1",
                    &[
                        r("Namespace", "demo"),
                        r("CustomResourceDefinition", "crd"),
                        r("ConfigMap", "moved"),
                        r("Secret", "s"),
                    ],
                ),
                record("b.yaml", "b1", &[r("ConfigMap", "moved")]),
            ],
        );
        assert_eq!(
            steps,
            vec![Step::Remove {
                source: "a.yaml".into(),
                prune: vec![
                    r("Secret", "s"),
                    r("CustomResourceDefinition", "crd"),
                    r("Namespace", "demo"),
                ],
            }]
        );
    }

    #[test]
    fn an_unreadable_file_is_reported_and_keeps_its_objects() {
        let broken = Manifest {
            source: "a.yaml".into(),
            checksum: "c2".into(),
            objects: Err(ManifestError::Missing {
                doc: 1,
                field: "kind",
            }),
        };
        // b.yaml moved away from ConfigMap "cm", which a.yaml's record still holds.
        let steps = plan(
            &[broken, manifest("b.yaml", "b2", &[])],
            &[
                record("a.yaml", "c1", &[r("ConfigMap", "cm")]),
                record("b.yaml", "b1", &[r("ConfigMap", "cm"), r("Secret", "s")]),
            ],
        );
        assert_eq!(
            steps,
            vec![
                Step::Invalid {
                    source: "a.yaml".into(),
                    checksum: "c2".into(),
                    error: ManifestError::Missing {
                        doc: 1,
                        field: "kind",
                    },
                },
                Step::Apply {
                    source: "b.yaml".into(),
                    checksum: "b2".into(),
                    objects: vec![],
                    prune: vec![r("Secret", "s")],
                    recorded: vec![r("ConfigMap", "cm"), r("Secret", "s")],
                },
            ]
        );
    }
}
