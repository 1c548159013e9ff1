//! A tc filter dump's messages, as the datapath sees them: the legacy tc
//! layer of an interface (a clsact qdisc with `cls_bpf` filters in
//! direct-action mode, as Cilium attaches before tcx and Calico without it).
//!
//! Pure: one decoded `TcMessage` in, one `Filter` out. netlink-packet-route
//! decodes the bpf classifier's options (`TCA_BPF_*`); what is left here is
//! what they mean. Per priority the kernel first sends the chain's head, a
//! message with the kind and no options (`tc` prints it as `filter protocol
//! all pref 1 bpf chain 0`): it is no filter.

use netlink_packet_route::tc::{TcAttribute, TcBpfFlags, TcFilterBpfOption, TcMessage, TcOption};

/// One message of a filter dump.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Filter {
    /// A priority's head: no filter.
    ChainHead,
    /// A `cls_bpf` filter running an eBPF program.
    Bpf(BpfFilter),
    /// A `cls_bpf` filter running classic BPF (it has no program id).
    ClassicBpf { prio: u16 },
    /// Another classifier (`u32`, `flower`, `matchall`, ...).
    Other { kind: String },
}

/// An eBPF program a tc filter runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BpfFilter {
    /// The filter's priority (`tc`'s `pref`) and handle.
    pub prio: u16,
    pub handle: u32,
    pub prog_id: u32,
    /// The filter's name: what the loader called it (Cilium:
    /// `cil_from_container-lxc…`; libbpf: `<program>:[<id>]`).
    pub name: Option<String>,
    /// Direct action: the program's return code is the verdict (what every
    /// eBPF datapath uses; without it the program only classifies).
    pub direct_action: bool,
}

/// What one message of a filter dump is.
pub fn filter(msg: &TcMessage) -> Filter {
    let kind = msg.attributes.iter().find_map(|a| match a {
        TcAttribute::Kind(k) => Some(k.as_str()),
        _ => None,
    });
    let options: Option<&Vec<TcOption>> = msg.attributes.iter().find_map(|a| match a {
        TcAttribute::Options(o) => Some(o),
        _ => None,
    });
    // tcm_info: the priority in its upper 16 bits, the protocol below.
    let prio = (msg.header.info >> 16) as u16;
    match (kind, options) {
        (Some("bpf"), None) => Filter::ChainHead,
        (Some("bpf"), Some(options)) => {
            let bpf = || {
                options.iter().filter_map(|o| match o {
                    TcOption::Bpf(b) => Some(b),
                    _ => None,
                })
            };
            let prog_id = bpf().find_map(|o| match o {
                TcFilterBpfOption::ProgId(id) => Some(*id),
                _ => None,
            });
            let Some(prog_id) = prog_id else { return Filter::ClassicBpf { prio } };
            Filter::Bpf(BpfFilter {
                prio,
                handle: u32::from(msg.header.handle.major) << 16 | u32::from(msg.header.handle.minor),
                prog_id,
                name: bpf().find_map(|o| match o {
                    TcFilterBpfOption::ProgName(n) => Some(n.clone()),
                    _ => None,
                }),
                direct_action: bpf()
                    .any(|o| matches!(o, TcFilterBpfOption::Flags(f) if f.contains(TcBpfFlags::DirectAction))),
            })
        }
        (Some(other), _) => Filter::Other { kind: other.to_owned() },
        (None, _) => Filter::Other { kind: String::new() },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use netlink_packet_core::{Emitable, Parseable};
    use netlink_packet_route::tc::{TcHandle, TcHeader};

    /// A message as the kernel sends it: built, emitted to bytes, and
    /// decoded again by netlink-packet-route (what a dump hands us).
    fn wire(info: u32, handle: u32, attributes: Vec<TcAttribute>) -> TcMessage {
        let mut m = TcMessage::default();
        m.header = TcHeader {
            index: 7,
            handle: TcHandle { major: (handle >> 16) as u16, minor: handle as u16 },
            parent: TcHandle { major: 0xffff, minor: 0xfff2 },
            info,
            ..Default::default()
        };
        m.attributes = attributes;
        let mut bytes = vec![0; m.buffer_len()];
        m.emit(&mut bytes);
        TcMessage::parse(&bytes[..]).expect("decodes")
    }

    const ETH_P_ALL_BE: u32 = 0x0300;

    #[test]
    fn ciliums_legacy_filter_is_its_program_by_id_with_direct_action() {
        let m = wire(
            1 << 16 | ETH_P_ALL_BE,
            1,
            vec![
                TcAttribute::Kind("bpf".into()),
                TcAttribute::Chain(0),
                TcAttribute::Options(vec![
                    TcOption::Bpf(TcFilterBpfOption::ProgId(1234)),
                    TcOption::Bpf(TcFilterBpfOption::ProgName("cil_from_container-lxc0123456789ab".into())),
                    TcOption::Bpf(TcFilterBpfOption::ProgTag([1, 2, 3, 4, 5, 6, 7, 8])),
                    TcOption::Bpf(TcFilterBpfOption::Flags(TcBpfFlags::DirectAction)),
                ]),
            ],
        );
        assert_eq!(
            filter(&m),
            Filter::Bpf(BpfFilter {
                prio: 1,
                handle: 1,
                prog_id: 1234,
                name: Some("cil_from_container-lxc0123456789ab".into()),
                direct_action: true,
            })
        );
    }

    /// libbpf (Calico's `bpf_tc_attach`): kernel-chosen priority 49152, a
    /// name made of the program's and its id.
    #[test]
    fn libbpfs_filter_keeps_its_priority_and_name() {
        let m = wire(
            49152 << 16 | ETH_P_ALL_BE,
            0x0001_0000,
            vec![
                TcAttribute::Kind("bpf".into()),
                TcAttribute::Options(vec![
                    TcOption::Bpf(TcFilterBpfOption::ProgName("cali_tc_preambl:[77]".into())),
                    TcOption::Bpf(TcFilterBpfOption::ProgId(77)),
                ]),
            ],
        );
        let Filter::Bpf(f) = filter(&m) else { panic!("{m:?}") };
        assert_eq!((f.prio, f.handle, f.prog_id, f.direct_action), (49152, 0x0001_0000, 77, false));
        assert_eq!(f.name.as_deref(), Some("cali_tc_preambl:[77]"));
    }

    #[test]
    fn a_priority_head_is_no_filter() {
        let m = wire(1 << 16 | ETH_P_ALL_BE, 0, vec![TcAttribute::Kind("bpf".into()), TcAttribute::Chain(0)]);
        assert_eq!(filter(&m), Filter::ChainHead);
    }

    #[test]
    fn classic_bpf_and_other_classifiers_run_no_ebpf_program() {
        let classic = wire(
            2 << 16,
            1,
            vec![
                TcAttribute::Kind("bpf".into()),
                TcAttribute::Options(vec![TcOption::Bpf(TcFilterBpfOption::ClassId(TcHandle { major: 1, minor: 1 }))]),
            ],
        );
        assert_eq!(filter(&classic), Filter::ClassicBpf { prio: 2 });
        let u32_ = wire(3 << 16, 0x800, vec![TcAttribute::Kind("u32".into())]);
        assert_eq!(filter(&u32_), Filter::Other { kind: "u32".into() });
        assert_eq!(filter(&wire(0, 0, vec![])), Filter::Other { kind: String::new() });
    }

    /// The name is the loader's to choose: any bytes, up to what fits.
    #[test]
    fn a_long_or_odd_name_is_kept_as_given() {
        let name: String = "x".repeat(255);
        let m = wire(
            1 << 16,
            1,
            vec![
                TcAttribute::Kind("bpf".into()),
                TcAttribute::Options(vec![
                    TcOption::Bpf(TcFilterBpfOption::ProgId(9)),
                    TcOption::Bpf(TcFilterBpfOption::ProgName(name.clone())),
                ]),
            ],
        );
        let Filter::Bpf(f) = filter(&m) else { panic!() };
        assert_eq!(f.name, Some(name));
    }
}
