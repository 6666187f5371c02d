//! Round trips through [`Writer`] and [`Database`], and the page layout they agree on.

use std::io::Cursor;

use crate::page::{self, PageHeader, BRANCH_PAGE, FREELIST_PAGE, LEAF_PAGE, META_PAGE};
use crate::{Database, Error, Writer};

type Buckets = Vec<(&'static [u8], Vec<(Vec<u8>, Vec<u8>)>)>;

fn write(buckets: &Buckets, page_size: u32) -> Vec<u8> {
    let mut w = Writer::with_page_size(Cursor::new(Vec::new()), page_size).unwrap();
    for (name, entries) in buckets {
        let mut b = w.bucket(name).unwrap();
        for (k, v) in entries {
            b.put(k, v).unwrap();
        }
        b.finish().unwrap();
    }
    w.finish().unwrap().into_inner()
}

fn read_back(db: &Database, buckets: &Buckets) {
    let names: Vec<Vec<u8>> = buckets.iter().map(|(n, _)| n.to_vec()).collect();
    assert_eq!(db.bucket_names().unwrap(), names);
    for (name, entries) in buckets {
        let b = db.bucket(name).unwrap().expect("bucket");
        assert_eq!(
            &b.entries().unwrap(),
            entries,
            "{:?}",
            String::from_utf8_lossy(name)
        );
    }
}

fn numbered(n: usize, value_len: usize) -> Vec<(Vec<u8>, Vec<u8>)> {
    (0..n)
        .map(|i| {
            let k = format!("key/{i:08}").into_bytes();
            let v = vec![(i % 251) as u8; value_len];
            (k, v)
        })
        .collect()
}

fn header(file: &[u8], page: usize, page_size: usize) -> PageHeader {
    PageHeader::decode(&file[page * page_size..]).unwrap()
}

#[test]
fn fresh_file_layout() {
    let file = write(&vec![(b"a", vec![(b"k".to_vec(), b"v".to_vec())])], 4096);
    // metas, freelist, the root bucket's leaf (bucket `a` is inline in it)
    assert_eq!(file.len(), 4 * 4096);
    assert_eq!(header(&file, 0, 4096).flags, META_PAGE);
    assert_eq!(header(&file, 1, 4096).flags, META_PAGE);
    assert_eq!(header(&file, 1, 4096).id, 1);
    assert_eq!(header(&file, 2, 4096).flags, FREELIST_PAGE);
    assert_eq!(header(&file, 2, 4096).count, 0);
    assert_eq!(header(&file, 3, 4096).flags, LEAF_PAGE);
    let db = Database::parse(file.clone()).unwrap();
    let m = db.meta();
    assert_eq!((m.page_size, m.root, m.freelist, m.pgid), (4096, 3, 2, 4));
    assert_eq!(m.txid, 2, "meta 0 is the newer one");
    assert!(db.bucket(b"a").unwrap().unwrap().is_inline());
    assert_eq!(db.freelist().unwrap(), Vec::<u64>::new());
    db.check().unwrap();
    // The inline bucket's value: header (root 0, sequence 0), then a leaf page of one entry.
    let root = db.root().entries().unwrap();
    assert_eq!(root[0].0, b"a");
    let v = &root[0].1;
    assert_eq!(v.len(), 16 + 16 + 16 + 2);
    assert_eq!(&v[..16], &[0u8; 16]);
    assert_eq!(PageHeader::decode(&v[16..]).unwrap().count, 1);
}

#[test]
fn round_trip_of_several_buckets() {
    let buckets: Buckets = vec![
        (b"alarm", vec![]),
        (b"key", numbered(3000, 40)),
        (b"lease", numbered(5, 8)),
        (
            b"meta",
            vec![(b"consistent_index".to_vec(), 7u64.to_be_bytes().to_vec())],
        ),
    ];
    let db = Database::parse(write(&buckets, 4096)).unwrap();
    read_back(&db, &buckets);
    db.check().unwrap();
    assert!(db.bucket(b"alarm").unwrap().unwrap().is_inline());
    assert!(!db.bucket(b"key").unwrap().unwrap().is_inline());
    assert!(db.bucket(b"nope").unwrap().is_none());
}

#[test]
fn inline_only_up_to_a_quarter_page() {
    // header 16 + element 16 + key 1 + value: 1024 bytes fit inline, one more does not.
    let fits = vec![(b"k".to_vec(), vec![1u8; 1024 - 33])];
    let over = vec![(b"k".to_vec(), vec![1u8; 1024 - 32])];
    let db = Database::parse(write(
        &vec![(b"a", fits.clone()), (b"b", over.clone())],
        4096,
    ))
    .unwrap();
    assert!(db.bucket(b"a").unwrap().unwrap().is_inline());
    assert!(!db.bucket(b"b").unwrap().unwrap().is_inline());
    read_back(&db, &vec![(b"a", fits), (b"b", over)]);
    db.check().unwrap();
}

#[test]
fn large_values_use_overflow_pages() {
    let big = vec![
        (b"a".to_vec(), vec![1u8; 10]),
        (b"b".to_vec(), (0..20_000u32).map(|i| i as u8).collect()),
        (b"c".to_vec(), vec![3u8; 10]),
    ];
    let buckets: Buckets = vec![(b"big", big)];
    let file = write(&buckets, 4096);
    // leaf [a], leaf [b] over 5 pages, leaf [c], a branch, the root leaf: 3 + 1 + 5 + 1 + 1 + 1
    assert_eq!(file.len(), 12 * 4096);
    let b_leaf = header(&file, 4, 4096);
    assert_eq!(
        (b_leaf.flags, b_leaf.count, b_leaf.overflow),
        (LEAF_PAGE, 1, 4)
    );
    assert_eq!(header(&file, 10, 4096).flags, BRANCH_PAGE);
    let db = Database::parse(file).unwrap();
    read_back(&db, &buckets);
    db.check().unwrap();
}

#[test]
fn many_keys_build_several_branch_levels() {
    let keys = numbered(60_000, 20);
    let buckets: Buckets = vec![(b"key", keys)];
    let file = write(&buckets, 4096);
    let db = Database::parse(file.clone()).unwrap();
    read_back(&db, &buckets);
    db.check().unwrap();
    // The bucket's root is a branch over branches over leaves.
    let root = db.root().entries().unwrap();
    let key_root = page::u64_at(&root[0].1, 0) as usize;
    let top = header(&file, key_root, 4096);
    assert_eq!(top.flags, BRANCH_PAGE);
    let first_child = page::u64_at(&file[key_root * 4096 + 16..], 8) as usize;
    assert_eq!(header(&file, first_child, 4096).flags, BRANCH_PAGE);
}

#[test]
fn other_page_sizes_come_from_the_meta() {
    let buckets: Buckets = vec![(b"key", numbered(2000, 30))];
    let file = write(&buckets, 16384);
    assert_eq!(file.len() % 16384, 0);
    let db = Database::parse(file).unwrap();
    assert_eq!(db.meta().page_size, 16384);
    read_back(&db, &buckets);
    db.check().unwrap();
}

#[test]
fn a_damaged_meta_falls_back_to_the_other_and_trailers_are_ignored() {
    let buckets: Buckets = vec![(b"key", numbered(10, 5))];
    let mut file = write(&buckets, 4096);
    file.extend_from_slice(&[0xAB; 32]); // etcd's sha256 trailer
    let db = Database::parse(file.clone()).unwrap();
    read_back(&db, &buckets);

    let mut one_bad = file.clone();
    one_bad[16 + 20] ^= 1;
    let db = Database::parse(one_bad.clone()).unwrap();
    assert_eq!(db.meta().txid, 1);
    read_back(&db, &buckets);

    let mut both_bad = one_bad;
    both_bad[4096 + 16 + 20] ^= 1;
    assert!(matches!(
        Database::parse(both_bad),
        Err(Error::InvalidMeta(_))
    ));
    assert!(matches!(
        Database::parse(file[..4096 * 3].to_vec()),
        Err(Error::Corrupt(_))
    ));
    assert!(matches!(
        Database::parse(b"not bolt".to_vec()),
        Err(Error::InvalidMeta(_))
    ));
}

#[test]
fn check_finds_unreachable_pages_and_damaged_trees() {
    let buckets: Buckets = vec![(b"key", numbered(500, 30))];
    let file = write(&buckets, 4096);
    // One more page nobody references.
    let mut extra = file.clone();
    extra.extend_from_slice(&[0u8; 4096]);
    rewrite_meta(&mut extra, |m| m.pgid += 1);
    let e = Database::parse(extra)
        .unwrap()
        .check()
        .unwrap_err()
        .to_string();
    assert!(e.contains("unreachable unfreed"), "{e}");
    // A leaf's key size pointing past its page.
    let mut bad = file;
    let at = 3 * 4096 + 16 + 8;
    bad[at..at + 4].copy_from_slice(&100_000u32.to_le_bytes());
    let db = Database::parse(bad).unwrap();
    assert!(matches!(db.check(), Err(Error::Corrupt(_))));
    assert!(db.bucket(b"key").unwrap().unwrap().entries().is_err());
}

#[test]
fn freelist_pages_are_read_with_either_count_form() {
    let buckets: Buckets = vec![(b"key", numbered(10, 5))];
    let mut file = write(&buckets, 4096);
    // Three free pages past the tree, listed on the freelist page.
    let free_from = file.len() as u64 / 4096;
    file.extend_from_slice(&[0u8; 3 * 4096]);
    rewrite_meta(&mut file, |m| m.pgid += 3);
    let list: Vec<u64> = (free_from..free_from + 3).collect();
    write_freelist(&mut file, &list, false);
    let db = Database::parse(file.clone()).unwrap();
    assert_eq!(db.freelist().unwrap(), list);
    db.check().unwrap();
    write_freelist(&mut file, &list, true);
    assert_eq!(Database::parse(file).unwrap().freelist().unwrap(), list);
}

#[test]
fn writer_refuses_unsorted_and_empty_keys() {
    let mut w = Writer::new(Cursor::new(Vec::new())).unwrap();
    let mut b = w.bucket(b"b").unwrap();
    b.put(b"2", b"").unwrap();
    assert!(matches!(b.put(b"1", b""), Err(Error::Unsorted(_))));
    assert!(matches!(b.put(b"2", b""), Err(Error::Unsorted(_))));
    assert!(matches!(b.put(b"", b""), Err(Error::EmptyKey)));
    b.finish().unwrap();
    assert!(matches!(w.bucket(b"a"), Err(Error::Unsorted(_))));
    assert!(matches!(
        Writer::with_page_size(Cursor::new(Vec::new()), 1000),
        Err(Error::InvalidPageSize(1000))
    ));
}

#[test]
fn nested_buckets_are_read() {
    // A root-level bucket whose leaf holds an inline nested bucket, built by hand.
    let mut inner = Vec::new();
    inner.extend_from_slice(&[0u8; 16]);
    PageHeader {
        id: 0,
        flags: LEAF_PAGE,
        count: 1,
        overflow: 0,
    }
    .encode(&mut inner);
    inner.extend_from_slice(&0u32.to_le_bytes());
    inner.extend_from_slice(&16u32.to_le_bytes());
    inner.extend_from_slice(&1u32.to_le_bytes());
    inner.extend_from_slice(&1u32.to_le_bytes());
    inner.extend_from_slice(b"xy");
    let mut w = Writer::new(Cursor::new(Vec::new())).unwrap();
    let mut b = w.bucket(b"outer").unwrap();
    b.tree_put_bucket(b"inner", &inner);
    b.finish().unwrap();
    let db = Database::parse(w.finish().unwrap().into_inner()).unwrap();
    let outer = db.bucket(b"outer").unwrap().unwrap();
    let nested = outer.bucket(b"inner").unwrap().unwrap();
    assert_eq!(
        nested.entries().unwrap(),
        vec![(b"x".to_vec(), b"y".to_vec())]
    );
    db.check().unwrap();
}

fn rewrite_meta(file: &mut [u8], change: impl Fn(&mut page::Meta)) {
    for p in [0usize, 1] {
        let at = p * 4096 + 16;
        let mut m = page::Meta::decode(&file[at..]).unwrap();
        change(&mut m);
        file[at..at + page::META_SIZE].copy_from_slice(&m.encode());
    }
}

fn write_freelist(file: &mut [u8], ids: &[u64], overflow_count: bool) {
    let mut b = Vec::new();
    let count = if overflow_count {
        page::FREELIST_COUNT_OVERFLOW
    } else {
        ids.len() as u16
    };
    PageHeader {
        id: 2,
        flags: FREELIST_PAGE,
        count,
        overflow: 0,
    }
    .encode(&mut b);
    if overflow_count {
        b.extend_from_slice(&(ids.len() as u64).to_le_bytes());
    }
    for id in ids {
        b.extend_from_slice(&id.to_le_bytes());
    }
    file[2 * 4096..2 * 4096 + b.len()].copy_from_slice(&b);
}
