use std::time::Instant;

use super::*;
use crate::types::*;

/// Commands as an older release (main at 4f9aa08) wrote them into its WAL: the payloads of
/// `etcdctl put /registry/pods/default/p1 <28 bytes of MessagePack>` and of a txn
/// `value("/k/ascii") = "hello"` → put `/k/ascii world`, del `/k/gone`, else put
/// `/k/failed x`, cut out of the WAL records.
const OLD_PUT: &str = "81a350757496dc00192f72656769737472792f706f64732f64656661756c742f7031\
                       dc001ccc82cca46b696e64cca3506f64cca86d65746164617461cc81cca46e616d65\
                       cca2703100c2c2c2";
const OLD_TXN: &str = "81a354786e939194a5457175616c81a556616c75659568656c6c6f982f6b2f6173636969\
                       909281a350757496982f6b2f617363696995776f726c6400c2c2c281ab44656c65746552\
                       616e676593972f6b2f676f6e6590c29181a350757496992f6b2f6661696c6564917800c2\
                       c2c2";

/// The MessagePack object the old put stored.
const POD_VALUE: &[u8] = b"\x82\xa4kind\xa3Pod\xa8metadata\x81\xa4name\xa2p1";

fn put(key: &[u8], value: &[u8]) -> PutRequest {
    PutRequest {
        key: key.to_vec(),
        value: value.to_vec(),
        ..PutRequest::default()
    }
}

fn old_put() -> Command {
    Command::Put(put(b"/registry/pods/default/p1", POD_VALUE))
}

fn old_txn() -> Command {
    Command::Txn(TxnRequest {
        compare: vec![Compare {
            result: CompareResult::Equal,
            target: CompareTarget::Value(b"hello".to_vec()),
            key: b"/k/ascii".to_vec(),
            range_end: vec![],
        }],
        success: vec![
            RequestOp::Put(put(b"/k/ascii", b"world")),
            RequestOp::DeleteRange(DeleteRangeRequest {
                key: b"/k/gone".to_vec(),
                ..DeleteRangeRequest::default()
            }),
        ],
        failure: vec![RequestOp::Put(put(b"/k/failed", b"x"))],
    })
}

fn unhex(s: &str) -> Vec<u8> {
    hex::decode(s).expect("fixture is hex")
}

fn encode_in(form: BytesForm, cmd: &Command) -> Vec<u8> {
    with_form(form, || cmd.encode())
}

#[test]
fn commands_an_older_release_wrote_decode() {
    assert_eq!(Command::decode(&unhex(OLD_PUT)).unwrap(), old_put());
    assert_eq!(Command::decode(&unhex(OLD_TXN)).unwrap(), old_txn());
}

#[test]
fn int_array_form_is_byte_for_byte_the_old_encoding() {
    assert_eq!(encode_in(BytesForm::IntArray, &old_put()), unhex(OLD_PUT));
    assert_eq!(encode_in(BytesForm::IntArray, &old_txn()), unhex(OLD_TXN));
}

#[test]
fn bin_form_writes_raw_bytes_and_round_trips() {
    let bin = encode_in(BytesForm::Bin, &old_put());
    // {"Put": [bin 25 key, bin 28 value, 0, false, false, false]}
    let mut want = unhex("81a350757496c419");
    want.extend_from_slice(b"/registry/pods/default/p1");
    want.extend_from_slice(&unhex("c41c"));
    want.extend_from_slice(POD_VALUE);
    want.extend_from_slice(&unhex("00c2c2c2"));
    assert_eq!(bin, want);
    assert!(bin.len() < unhex(OLD_PUT).len());
    assert_eq!(Command::decode(&bin).unwrap(), old_put());

    let txn = encode_in(BytesForm::Bin, &old_txn());
    assert_eq!(Command::decode(&txn).unwrap(), old_txn());
}

#[test]
fn outputs_round_trip_in_both_forms() {
    let kv = KeyValue {
        key: b"/registry/pods/default/p1".to_vec(),
        create_revision: 2,
        mod_revision: 7,
        version: 3,
        value: POD_VALUE.to_vec(),
        lease: 0,
    };
    let out = vec![Output {
        revision: 7,
        result: Ok(CommandResponse::DeleteRange(DeleteRangeResponse {
            deleted: 1,
            prev_kvs: vec![kv.clone()],
        })),
    }];
    for form in [BytesForm::IntArray, BytesForm::Bin] {
        let bytes = with_form(form, || rmp_serde::to_vec(&out).unwrap());
        let back: Vec<Output> = rmp_serde::from_slice(&bytes).unwrap();
        assert_eq!(back, out, "{form:?}");
    }
}

#[test]
fn a_sequence_element_that_is_not_a_byte_is_an_error() {
    // {"Put": [[0x2f, 300], [], 0, false, false, false]}
    let bad = unhex("81a350757496922fcd012c9000c2c2c2");
    assert!(Command::decode(&bad).is_err());
    // A byte string cut short.
    let short = unhex("81a350757496c4052f");
    assert!(Command::decode(&short).is_err());
}

#[test]
fn with_form_nests_and_restores() {
    assert_eq!(write_form(), BytesForm::IntArray, "the default");
    with_form(BytesForm::Bin, || {
        assert_eq!(write_form(), BytesForm::Bin);
        with_form(BytesForm::IntArray, || {
            assert_eq!(write_form(), BytesForm::IntArray)
        });
        assert_eq!(write_form(), BytesForm::Bin);
    });
    assert_eq!(write_form(), BytesForm::IntArray);
}

/// A pod as the API server stores it: MessagePack with field names, about 3 KiB.
fn pod_value() -> Vec<u8> {
    let labels: serde_json::Map<String, serde_json::Value> = (0..8)
        .map(|i| {
            (
                format!("app.kubernetes.io/label-{i}"),
                format!("value-{i}").into(),
            )
        })
        .collect();
    let containers: Vec<_> = (0..5)
        .map(|i| {
            serde_json::json!({
                "name": format!("container-{i}"),
                "image": "registry.k8s.io/pause:3.9",
                "args": ["--port=8080", "--verbose", "--config=/etc/config/app.yaml"],
                "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}},
                "env": [{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
                "volumeMounts": [{"name": "kube-api-access-abcde", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "readOnly": true}],
                "terminationMessagePath": "/dev/termination-log",
                "imagePullPolicy": "IfNotPresent",
            })
        })
        .collect();
    let pod = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "web-7d9f8b6c5d-x2x4q",
            "generateName": "web-7d9f8b6c5d-",
            "namespace": "default",
            "uid": "5b0c7b52-3f4e-4d8a-9a7e-2c1f0e8d9b6a",
            "resourceVersion": "123456",
            "creationTimestamp": "2026-11-30T03:00:00Z",
            "labels": labels,
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-7d9f8b6c5d", "uid": "0f4c1d2e-8b7a-4c3d-9e2f-1a0b9c8d7e6f", "controller": true, "blockOwnerDeletion": true}],
            "managedFields": [{"manager": "kube-controller-manager", "operation": "Update", "apiVersion": "v1", "time": "2026-11-30T03:00:00Z", "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": {"f:generateName": {}, "f:labels": {"f:app": {}}}}}],
        },
        "spec": {
            "containers": containers,
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 30,
            "dnsPolicy": "ClusterFirst",
            "serviceAccountName": "default",
            "nodeName": "hollow-node-0042",
            "schedulerName": "default-scheduler",
            "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}],
        },
        "status": {"phase": "Pending", "qosClass": "Burstable"},
    });
    rmp_serde::to_vec_named(&pod).unwrap()
}

/// Encode + decode of a pod-sized put in both forms, printed as a table (run with
/// `--nocapture`; a debug build's times, not asserted). Only the sizes are checked.
#[test]
fn pod_put_codec_table() {
    let value = pod_value();
    assert!(
        (2500..4500).contains(&value.len()),
        "a pod-sized value: {}",
        value.len()
    );
    let cmd = Command::Put(put(b"/registry/pods/default/web-7d9f8b6c5d-x2x4q", &value));
    const ROUNDS: u32 = 200;
    println!("pod put, value {} bytes, {ROUNDS} rounds", value.len());
    println!("| form | encoded bytes | encode µs | decode µs |");
    println!("|---|---:|---:|---:|");
    let mut sizes = Vec::new();
    for form in [BytesForm::IntArray, BytesForm::Bin] {
        let bytes = encode_in(form, &cmd);
        let t = Instant::now();
        for _ in 0..ROUNDS {
            std::hint::black_box(encode_in(form, std::hint::black_box(&cmd)));
        }
        let enc = t.elapsed() / ROUNDS;
        let t = Instant::now();
        for _ in 0..ROUNDS {
            std::hint::black_box(Command::decode(std::hint::black_box(&bytes)).unwrap());
        }
        let dec = t.elapsed() / ROUNDS;
        assert_eq!(Command::decode(&bytes).unwrap(), cmd);
        println!(
            "| {form:?} | {} | {:.1} | {:.1} |",
            bytes.len(),
            enc.as_secs_f64() * 1e6,
            dec.as_secs_f64() * 1e6
        );
        sizes.push(bytes.len());
    }
    // The bin form carries the value once plus a 3-byte header per byte string.
    assert!(sizes[1] < value.len() + 100, "{sizes:?}");
    assert!(sizes[0] > sizes[1], "{sizes:?}");
}
