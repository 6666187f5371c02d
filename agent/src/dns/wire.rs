//! DNS messages in and out (hickory-proto's wire format), without I/O: a request's bytes
//! become either reply bytes or "forward these bytes upstream".

use hickory_proto::op::{Edns, Message, MessageType, Metadata, OpCode, ResponseCode};
use hickory_proto::rr::rdata::{A, AAAA, CNAME, NS, PTR, SOA, SRV};
use hickory_proto::rr::{Name, RData, Record as WireRecord, RecordType};

use super::answer::{self, Answer, Data, QType, Record, TTL};
use super::index::Index;

/// What to do with a request.
#[derive(Debug, PartialEq, Eq)]
pub enum Step {
    /// Send these bytes back.
    Reply(Vec<u8>),
    /// Relay the request to the upstream resolvers.
    Forward,
    /// Not a DNS message: drop it.
    Drop,
}

/// The largest UDP reply without EDNS (RFC 1035).
const UDP_LIMIT: usize = 512;

fn qtype(t: RecordType) -> QType {
    match t {
        RecordType::A => QType::A,
        RecordType::AAAA => QType::Aaaa,
        RecordType::CNAME => QType::Cname,
        RecordType::SRV => QType::Srv,
        RecordType::PTR => QType::Ptr,
        RecordType::SOA => QType::Soa,
        RecordType::NS => QType::Ns,
        RecordType::ANY => QType::Any,
        _ => QType::Other,
    }
}

fn name(s: &str) -> Option<Name> {
    Name::from_ascii(s).ok()
}

fn wire(r: &Record) -> Option<WireRecord> {
    let data = match &r.data {
        Data::A(ip) => RData::A(A(*ip)),
        Data::Aaaa(ip) => RData::AAAA(AAAA(*ip)),
        Data::Cname(t) => RData::CNAME(CNAME(name(t)?)),
        Data::Ptr(t) => RData::PTR(PTR(name(t)?)),
        Data::Ns(t) => RData::NS(NS(name(t)?)),
        Data::Srv {
            priority,
            weight,
            port,
            target,
        } => RData::SRV(SRV::new(*priority, *weight, *port, name(target)?)),
        Data::Soa {
            mname,
            rname,
            serial,
        } => RData::SOA(SOA::new(
            name(mname)?,
            name(rname)?,
            *serial,
            7200,
            1800,
            86400,
            TTL,
        )),
    };
    Some(WireRecord::from_rdata(name(&r.name)?, TTL, data))
}

fn reply(req: &Message, code: ResponseCode) -> Message {
    let mut m = Message::response(req.metadata.id, req.metadata.op_code);
    m.metadata = Metadata::response_from_request(&req.metadata);
    m.metadata.recursion_available = true;
    m.metadata.response_code = code;
    m.add_queries(req.queries.iter().cloned());
    if req.edns.is_some() {
        let mut edns = Edns::new();
        edns.set_max_payload(1232);
        m.set_edns(edns);
    }
    m
}

fn encode(m: &Message, limit: Option<usize>) -> Vec<u8> {
    let bytes = m.to_vec().unwrap_or_default();
    match limit {
        Some(limit) if bytes.len() > limit => m.truncate().to_vec().unwrap_or_default(),
        _ => bytes,
    }
}

/// The step for `request` (over UDP if `udp`, which limits the reply's size to the
/// request's EDNS payload or 512 bytes and sets TC beyond it), with the zone `domain`
/// holding `index` (`None`: not synced yet, zone names fail with SERVFAIL).
pub fn step(request: &[u8], index: Option<&Index>, domain: &str, udp: bool) -> Step {
    let Ok(req) = Message::from_vec(request) else {
        return Step::Drop;
    };
    if req.metadata.message_type != MessageType::Query {
        return Step::Drop;
    }
    let limit = udp.then(|| {
        req.edns
            .as_ref()
            .map_or(UDP_LIMIT, |e| usize::from(e.max_payload()).max(UDP_LIMIT))
    });
    if req.metadata.op_code != OpCode::Query {
        return Step::Reply(encode(&reply(&req, ResponseCode::NotImp), limit));
    }
    let [q] = req.queries.as_slice() else {
        return Step::Reply(encode(&reply(&req, ResponseCode::FormErr), limit));
    };
    let qname = q.name.to_ascii();
    let empty = Index::default();
    let answer = answer::answer(index.unwrap_or(&empty), domain, &qname, qtype(q.query_type));
    let Answer::Zone {
        nxdomain,
        answers,
        additionals,
        soa,
    } = answer
    else {
        return Step::Forward;
    };
    if index.is_none() {
        return Step::Reply(encode(&reply(&req, ResponseCode::ServFail), limit));
    }
    let code = if nxdomain {
        ResponseCode::NXDomain
    } else {
        ResponseCode::NoError
    };
    let mut m = reply(&req, code);
    m.metadata.authoritative = true;
    if answers.is_empty() {
        m.add_authorities(wire(&soa));
    }
    m.add_answers(answers.iter().filter_map(wire));
    m.add_additionals(additionals.iter().filter_map(wire));
    Step::Reply(encode(&m, limit))
}

/// A SERVFAIL reply to `request` (upstreams unreachable), if it parses.
pub fn servfail(request: &[u8]) -> Option<Vec<u8>> {
    let req = Message::from_vec(request).ok()?;
    Some(encode(&reply(&req, ResponseCode::ServFail), None))
}

/// REFUSED for `request` (a source that may not ask); no larger than the question.
pub fn refused(request: &[u8]) -> Option<Vec<u8>> {
    let req = Message::from_vec(request).ok()?;
    Some(encode(&reply(&req, ResponseCode::Refused), None))
}

#[cfg(test)]
mod tests {
    use hickory_proto::op::Query;

    use super::*;

    fn query(name: &str, t: RecordType) -> Vec<u8> {
        let mut m = Message::query();
        m.metadata.id = 4242;
        m.metadata.recursion_desired = true;
        m.add_query(Query::query(Name::from_ascii(name).unwrap(), t));
        m.to_vec().unwrap()
    }

    fn index() -> Index {
        let svc: k8s_openapi::api::core::v1::Service = serde_json::from_value(serde_json::json!({
            "metadata": {"namespace": "default", "name": "web"},
            "spec": {"clusterIP": "10.43.0.20", "ports": [{"name": "http", "port": 80}]},
        }))
        .unwrap();
        super::super::index::build(&[svc], &[], 3)
    }

    fn reply(step: Step) -> Message {
        let Step::Reply(bytes) = step else {
            panic!("expected a reply, got {step:?}");
        };
        Message::from_vec(&bytes).unwrap()
    }

    #[test]
    fn a_zone_name_gets_an_authoritative_answer() {
        let i = index();
        let m = reply(step(
            &query("web.default.svc.cluster.local.", RecordType::A),
            Some(&i),
            "cluster.local",
            true,
        ));
        assert_eq!(m.metadata.id, 4242);
        assert_eq!(m.metadata.message_type, MessageType::Response);
        assert!(
            m.metadata.authoritative
                && m.metadata.recursion_available
                && m.metadata.recursion_desired
        );
        assert_eq!(m.metadata.response_code, ResponseCode::NoError);
        assert_eq!(m.queries.len(), 1);
        let answers: Vec<String> = m
            .answers
            .iter()
            .map(|r| format!("{} {} {}", r.name, r.ttl, r.data))
            .collect();
        assert_eq!(answers, ["web.default.svc.cluster.local. 5 10.43.0.20"]);
        assert!(m.authorities.is_empty());
    }

    #[test]
    fn an_unknown_zone_name_is_nxdomain_with_the_soa() {
        let i = index();
        let m = reply(step(
            &query("nope.default.svc.cluster.local.", RecordType::A),
            Some(&i),
            "cluster.local",
            true,
        ));
        assert_eq!(m.metadata.response_code, ResponseCode::NXDomain);
        assert!(m.answers.is_empty());
        assert_eq!(m.authorities.len(), 1);
        assert_eq!(m.authorities[0].record_type(), RecordType::SOA);
        assert_eq!(m.authorities[0].name.to_ascii(), "cluster.local.");
    }

    #[test]
    fn other_names_are_forwarded_and_unsynced_zone_names_fail() {
        let i = index();
        let q = query("example.org.", RecordType::A);
        assert_eq!(step(&q, Some(&i), "cluster.local", true), Step::Forward);
        assert_eq!(step(&q, None, "cluster.local", true), Step::Forward);
        let m = reply(step(
            &query("web.default.svc.cluster.local.", RecordType::A),
            None,
            "cluster.local",
            false,
        ));
        assert_eq!(m.metadata.response_code, ResponseCode::ServFail);
        assert_eq!(
            step(b"\x00\x01", Some(&i), "cluster.local", true),
            Step::Drop
        );
    }

    #[test]
    fn a_reply_too_large_for_udp_is_truncated() {
        let services: Vec<k8s_openapi::api::core::v1::Service> =
            vec![serde_json::from_value(serde_json::json!({
                "metadata": {"namespace": "default", "name": "many"},
                "spec": {"clusterIP": "None"},
            }))
            .unwrap()];
        let addresses: Vec<String> = (1..=60).map(|i| format!("10.42.0.{i}")).collect();
        let slice: k8s_openapi::api::discovery::v1::EndpointSlice = serde_json::from_value(serde_json::json!({
            "metadata": {"namespace": "default", "name": "many-x", "labels": {"kubernetes.io/service-name": "many"}},
            "addressType": "IPv4", "endpoints": [{"addresses": addresses}],
        }))
        .unwrap();
        let i = super::super::index::build(&services, &[slice], 1);
        let q = query("many.default.svc.cluster.local.", RecordType::A);
        let m = reply(step(&q, Some(&i), "cluster.local", true));
        assert!(m.metadata.truncation);
        assert!(m.answers.is_empty());
        let m = reply(step(&q, Some(&i), "cluster.local", false));
        assert!(!m.metadata.truncation);
        assert_eq!(m.answers.len(), 60);
    }
}
